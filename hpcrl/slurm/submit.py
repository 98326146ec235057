"""``hpcrl slurm submit``: render a template into the run directory and hand it to sbatch."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from hpcrl.errors import ExplainedError
from hpcrl.runtime.run_dir import RunDir
from hpcrl.slurm.render import Rendered, RenderOptions, render

SCRIPT_NAME = "job.sbatch"
LOG_PATTERN = "slurm-%j.out"


class SubmitError(ExplainedError):
    """sbatch is missing or refused the job; the message says what to do."""


@dataclass
class Submitted:
    """A submitted job: its id, the script sbatch read (None: a deleted temporary file)."""

    job_id: str
    script: Path | None
    rendered: Rendered


def find_sbatch() -> str:
    """The path of ``sbatch`` on PATH; a :class:`SubmitError` saying what to do instead when
    there is none."""
    found = shutil.which("sbatch")
    if found is None:
        raise SubmitError("sbatch not found on PATH: run `hpcrl slurm submit` on a Slurm login "
                          "node, or write the script with `hpcrl slurm render ... -o job.sbatch` "
                          "and submit that with sbatch where Slurm is installed")
    return found


def run_sbatch(sbatch: str, script: Path) -> str:
    """Submit ``script`` with ``sbatch --parsable``; returns the job id (SubmitError when
    sbatch refuses or does not answer)."""
    try:
        done = subprocess.run([sbatch, "--parsable", str(script)], capture_output=True,
                              text=True, timeout=120)
    except subprocess.TimeoutExpired:
        raise SubmitError("sbatch gave no answer within 120 s; is slurmctld up (scontrol "
                          "ping)?") from None
    if done.returncode != 0:
        raise SubmitError(f"sbatch refused the job (exit {done.returncode}): "
                          f"{(done.stderr or done.stdout).strip()}; the script is {script}")
    job_id = done.stdout.strip().splitlines()[-1].split(";")[0].strip() if done.stdout else ""
    if not job_id.isdigit():
        raise SubmitError(f"sbatch printed no job id: {done.stdout!r}")
    return job_id


def _make_log_dir(log: str | None) -> None:
    """sbatch does not create the directory of --output: a job without it dies silently."""
    if log and "%" not in os.path.dirname(log):
        Path(os.path.abspath(log)).parent.mkdir(parents=True, exist_ok=True)


def submit(opts: RenderOptions) -> Submitted:
    """Render ``opts`` and submit it. With a run directory the script and, unless --log says
    otherwise, the Slurm log go into it; without one the script is a temporary file."""
    sbatch = find_sbatch()
    if opts.run_dir is None:
        rendered = render(opts)
        _make_log_dir(opts.log)
        fd, name = tempfile.mkstemp(prefix="hpcrl-", suffix=".sbatch")
        with os.fdopen(fd, "w") as f:
            f.write(rendered.text)
        try:
            return Submitted(run_sbatch(sbatch, Path(name)), None, rendered)
        finally:
            os.unlink(name)  # sbatch keeps its own copy of the script
    run = RunDir(Path(os.path.abspath(opts.run_dir)))
    if run.checkpoint_path.exists():
        raise SubmitError(f"'{run.path}' already holds a run; pick another --run-dir, or "
                          f"resume it with `hpcrl train --resume {run.path}`")
    if opts.log is None:
        opts = replace(opts, log=str(run.path / LOG_PATTERN))
    rendered = render(opts)
    run.path.mkdir(parents=True, exist_ok=True)
    _make_log_dir(opts.log)
    script = run.path / SCRIPT_NAME
    script.write_text(rendered.text)
    return Submitted(run_sbatch(sbatch, script), script, rendered)
