"""An env that fails for good in one process: the run checkpoints and stops with status 4,
naming the env and its error, and resumes once the env is fixed (issue 51). The same under
MPI, every launcher and both families, is in tests/placement/mpi/test_exit_status.py; the
Slurm templates' requeue rule in tests/slurm/test_exit_status_slurm.py.
"""
from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

FAULTS = Path(__file__).resolve().parent / "placement" / "mpi"  # hpcrl_faults
ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.timeout(120)


def hpcrl(args: list[str], fault: str) -> subprocess.CompletedProcess:
    """``hpcrl ARGS`` in a process of its own, its env failing as ``fault`` says (the fault
    module reads the rank from PMI_RANK: 0 here)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PMI_RANK": "0", "HPCRL_FAULT": fault,
           "HPCRL_FAULT_STEP": "200", "HPCRL_FAULT_P": "0.01",
           "PYTHONPATH": os.pathsep.join([str(FAULTS), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "hpcrl.cli", *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=100)


@pytest.mark.parametrize("algo,budget", [("ppo", 20000), ("dqn", 3000)])
def test_one_process_checkpoints_stops_with_4_and_resumes(tmp_path, algo, budget):
    from hpcrl.runtime.checkpoint import load_checkpoint

    run_dir = tmp_path / "run"
    done = hpcrl(["train", "--run-dir", str(run_dir), "--set", f"algo.name={algo}",
                  "--set", "env.id=hpcrl_faults:FaultyCartPole-v0",
                  "--set", "env.max_restarts=0", "--set", f"train.total_env_steps={budget}",
                  "--set", "train.tensorboard=false"], "flaky:0")
    assert done.returncode == 4, done.stderr[-3000:]
    assert re.search(r"hpcrl: (one of the envs 0-\d+|env 0) \(global index\) failed: "
                     r"RuntimeError: the env broke at random \(injected fault\) "
                     r"\(env.max_restarts=0: restarts are off\)", done.stderr), done.stderr
    assert f"fix it, then continue with `hpcrl train --resume {run_dir}`" in done.stderr
    assert (run_dir / "stopped").read_text().startswith("env failed: ")
    state = load_checkpoint(run_dir / "checkpoints" / "last.pt")
    with open(run_dir / "progress.csv") as f:
        rows = list(csv.DictReader(f))
    assert int(state["counters"]["env_steps"]) == int(rows[-1]["env_steps"]) < budget
    assert state["placement"]["collectors"] == []  # the failed envs start afresh
    resumed = hpcrl(["train", "--resume", str(run_dir)], "none:")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert (run_dir / "eval.json").exists() and not (run_dir / "stopped").exists()
