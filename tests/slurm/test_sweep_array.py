"""`hpcrl slurm sweep ... --submit` on the local Slurm test cluster: one job array, a task
per point, each training its own run directory; a task stopped by the warning signal
checkpoints, is requeued and resumes its own point, while the other task runs through."""
from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
import slurmtools as st
import yaml
from template_jobs import TINY, job_env, write_config

pytestmark = pytest.mark.slurm
HPCRL = str(Path(sys.executable).with_name("hpcrl"))


def rows(run_dir: Path) -> list[dict[str, str]]:
    with open(run_dir / "progress.csv") as f:
        return list(csv.DictReader(f))


@pytest.mark.timeout(600)
def test_a_sweep_array_trains_every_point_and_a_requeued_task_resumes_its_own(tmp_path: Path
                                                                              ) -> None:
    config = write_config(tmp_path, {
        "scheme": {"preset": "ddppo",
                   "preemption": {"fraction_workers": 1.0, "fraction_samples": 1.0}},
        "train": {"total_env_steps": 8192, "checkpoint_every": 1000}})  # only the stop saves
    sweep = tmp_path / "sweep"
    env = st.slurm_env({**job_env(tmp_path / "probe"), "HPCRL_CMD": "hpcrl"})
    done = subprocess.run([HPCRL, "slurm", "sweep", "sync", str(config), "--seeds", "0-1",
                           "--nodes", "1", "--gpus-per-node", "2", "--max-running", "4",
                           "--run-dir", str(sweep), "--submit"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    array = done.stdout.strip()
    st.SUBMITTED.append(array)  # cancelled at the end if still alive
    assert "wrote" in done.stderr and f"submitted job array {array}" in done.stderr

    second = sweep / "seed=1"
    st.wait_path(second / "progress.csv", timeout=180)
    st.stop_mid_run_and_requeue(f"{array}_1", lambda: len(rows(second)), 3)
    for task in (f"{array}_0", f"{array}_1"):
        st.assert_completed(task, timeout=300)

    for seed in (0, 1):
        run = sweep / f"seed={seed}"
        assert yaml.safe_load((run / "config.yaml").read_text())["seed"] == seed
        progress = rows(run)
        assert [int(r["updates"]) for r in progress] == list(range(1, len(progress) + 1))
        assert int(progress[-1]["env_steps"]) >= 8192
    first_log = (sweep / "logs" / f"slurm-{array}_0.out").read_text()
    log = (sweep / "logs" / f"slurm-{array}_1.out").read_text()
    assert "requeueing" not in first_log and "restart 1:" not in first_log
    assert "hpcrl: stopped by SIGUSR1 after a checkpoint" in log
    assert "restart 1:" in log and f"train --resume {second}" in log
    assert f"now requeue job {array}_1, which resumes it" in log
    assert f"requeueing job {array}_1 to resume {second}" in log
    table = subprocess.run([HPCRL, "runs", str(sweep), "--json"], capture_output=True,
                           text=True, timeout=60)
    assert [r["state"] for r in json.loads(table.stdout)] == ["finished", "finished"]
    assert TINY["train"]["eval_episodes"] == 0  # finished by its budget, not an eval.json
