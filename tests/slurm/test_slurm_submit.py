"""hpcrl slurm submit: renders into the run directory and calls sbatch (a fake one here)."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from hpcrl.cli import main

FAKE_SBATCH = """#!/bin/bash
printf '%s\\n' "$@" > "{log}"
cp "${{@: -1}}" "{log}.script"
echo "{answer}"
"""


def fake_sbatch(tmp_path: Path, monkeypatch, answer: str = "4242", status: int = 0) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "sbatch.args"
    text = FAKE_SBATCH.format(log=log, answer=answer) + f"exit {status}\n"
    (bin_dir / "sbatch").write_text(text)
    (bin_dir / "sbatch").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    return log


def submit(*args: str):
    return CliRunner().invoke(main, ["slurm", "submit", *map(str, args)],
                              catch_exceptions=False)


def test_submit_writes_the_script_into_the_run_dir_and_prints_the_job_id(tmp_path, monkeypatch):
    log = fake_sbatch(tmp_path, monkeypatch)
    run = tmp_path / "runs" / "r1"
    out = submit("sync", "--nodes", "1", "--gpus-per-node", "2", "--run-dir", run)
    assert out.exit_code == 0, out.output
    assert out.output.strip().splitlines()[-1] == "4242"
    args = log.read_text().splitlines()
    assert args == ["--parsable", str(run / "job.sbatch")]
    script = (run / "job.sbatch").read_text()
    assert f"#SBATCH --output={run}/slurm-%j.out" in script
    assert f"RUN_DIR={run}" in script and "scheme.gradient_workers=2" in script


def test_submit_without_run_dir_uses_a_temporary_script(tmp_path, monkeypatch):
    log = fake_sbatch(tmp_path, monkeypatch, answer="77;cluster")
    out = submit("central", "--nodes", "1", "--gpus-per-node", "3", "--log",
                 tmp_path / "logs" / "%j.out")
    assert out.exit_code == 0, out.output
    assert out.output.strip().splitlines()[-1] == "77"
    script = Path(log.read_text().splitlines()[-1])
    assert not script.exists(), "the temporary script is removed after sbatch"
    assert "scheme.gradient_workers=2" in Path(f"{log}.script").read_text()
    assert (tmp_path / "logs").is_dir(), "sbatch does not create the log directory itself"


@pytest.mark.parametrize("problem, message", [
    ("missing", "sbatch not found on PATH"),
    ("refused", "sbatch refused the job"),
    ("taken", "already holds a run"),
])
def test_submit_errors_say_what_to_do(tmp_path, monkeypatch, problem, message):
    run = tmp_path / "run"
    if problem == "missing":
        monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    else:
        fake_sbatch(tmp_path, monkeypatch, answer="sbatch: error: invalid partition",
                    status=1 if problem == "refused" else 0)
    if problem == "taken":
        (run / "checkpoints").mkdir(parents=True)
        (run / "checkpoints" / "last.pt").write_bytes(b"x")
    out = submit("sync", "--nodes", "1", "--gpus-per-node", "2", "--run-dir", run)
    assert out.exit_code != 0 and message in out.output
