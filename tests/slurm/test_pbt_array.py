"""`hpcrl slurm pbt ... --submit` on the local Slurm test cluster: a population as one job
array, a task per member (each a DD-PPO job of 2 ranks on 2 nodes), each training its own
run directory and comparing with the others through the population's directory; a member
stopped by the warning signal checkpoints, is requeued and resumes itself, while the other
member runs through."""
from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
import slurmtools as st
import yaml
from template_jobs import job_env, write_config

from hpcrl.runtime.checkpoint import load_checkpoint

pytestmark = pytest.mark.slurm
HPCRL = str(Path(sys.executable).with_name("hpcrl"))
PBT = {"members": 2, "interval_env_steps": 512, "bottom_quantile": 0.5,
       "top_quantile": 0.5, "mutate": {"algo.lr": {"low": 1e-4, "high": 1e-2}}}
DDPPO = {"preset": "ddppo", "preemption": {"fraction_workers": 1.0, "fraction_samples": 1.0}}


def rows(run_dir: Path) -> list[dict[str, str]]:
    with open(run_dir / "progress.csv") as f:
        return list(csv.DictReader(f))


@pytest.mark.timeout(600)
def test_a_population_array_trains_every_member_and_a_requeued_one_resumes_itself(
        tmp_path: Path) -> None:
    config = write_config(tmp_path, {"train": {"total_env_steps": 4096,
                                               "checkpoint_every": 1000},
                                     "scheme": DDPPO, "pbt": PBT})
    root = tmp_path / "pop"
    env = st.slurm_env({**job_env(tmp_path / "probe"), "HPCRL_CMD": "hpcrl"})
    done = subprocess.run([HPCRL, "slurm", "pbt", "sync", str(config), "--nodes", "2",
                           "--gpus-per-node", "1", "--run-dir", str(root), "--submit"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    array = done.stdout.strip()
    st.SUBMITTED.append(array)  # cancelled at the end if still alive
    assert "2 array tasks of 2 members" in done.stderr, done.stderr

    second = root / "member-01"
    st.wait_path(second / "progress.csv", timeout=180)
    st.stop_mid_run_and_requeue(f"{array}_1", lambda: len(rows(second)), 12)
    for task in (f"{array}_0", f"{array}_1"):
        st.assert_completed(task, timeout=300)

    for k in range(2):
        run = root / f"member-{k:02d}"
        assert yaml.safe_load((run / "config.yaml").read_text())["seed"] == k
        progress = rows(run)
        assert [int(r["env_steps"]) for r in progress] == list(range(64, 4097, 64)), k
        published = json.loads((root / "population" / f"member_{k:03d}.json").read_text())
        assert published["env_steps"] == 4096
        state = load_checkpoint(run / "checkpoints" / "last.pt")
        assert state["world_size"] == 2  # a DD-PPO member of 2 ranks
    log = (root / "logs" / f"slurm-{array}_1.out").read_text()
    assert "hpcrl pbt: member 1 checkpointed and stopped" in log
    assert "restart 1:" in log and f"pbt --run-dir {root} --member 1" in log
    assert f"requeueing job {array}_1 to resume {second}" in log
    table = subprocess.run([HPCRL, "runs", str(root), "--json"], capture_output=True,
                           text=True, timeout=60)
    assert [r["state"] for r in json.loads(table.stdout)] == ["finished"] * 2
