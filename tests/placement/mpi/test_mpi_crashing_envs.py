"""The crashing-env test like RLlib's (issue 46), on multi-rank jobs: every env of every
collector crashes at random in step and reset, at a tenth of RLlib's rates and at RLlib's
own (0.0005 a step, 0.005 a reset). An asynchronous PPO job of 3 collector ranks under Open
MPI's ULFM, and a synchronous DD-PPO job of 2 ranks under MPICH (env restarts only: a
synchronous scheme cannot lose a rank), each finish their budget on CartPole with every
collector live, every crash survived, and the policy learnt. The serial job is in
tests/envs/test_crashing_envs.py.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import openmpi as ompi
import pytest
from hpcrl_crashing import RATES, crashing, faults_logged, restarts_counted
from mpirun import FAST, ROOT, rows, run

BUDGET = 20000
COMMON = [f"train.total_env_steps={BUDGET}", "train.tensorboard=false",
          "train.log_interval_s=60", "train.eval_episodes=5"]


@pytest.fixture(scope="session")
def openmpi() -> Path:
    """Open MPI's prefix (installed on first use)."""
    return ompi.install()


def check_learnt(run_dir: Path, log: Path) -> list[dict[str, str]]:
    """The budget spent, every crash counted once at most (the last rollouts' crashes may
    fall after the budget), and the policy learnt; returns the progress rows."""
    import json

    progress = rows(run_dir)
    assert int(progress[-1]["env_steps"]) >= BUDGET
    trained, evaluated = restarts_counted(str(run_dir))
    faults = faults_logged(str(log))
    assert 0 < trained + evaluated <= faults, (trained, evaluated, faults)
    evaluation = json.loads((run_dir / "eval.json").read_text())
    assert evaluation["mean_return"] >= 150, evaluation  # random play: about 20
    return progress


@pytest.mark.timeout(150)
@pytest.mark.parametrize("rate", list(RATES))
def test_an_async_job_under_ulfm_whose_envs_crash_at_random_learns_whole(openmpi, tmp_path,
                                                                         rate):
    run_dir, log = tmp_path / "run", tmp_path / "crashes.log"
    sets = ["scheme.preset=async-ppo", "scheme.collectors_per_worker=3",
            "algo.ppo.minibatch_size=192", *crashing(rate), *COMMON, "seed=1"]
    args = ["train", "--run-dir", str(run_dir)]
    for item in sets:
        args += ["--set", item]
    done = subprocess.run(ompi.hpcrl_command(openmpi, 4, args), capture_output=True,
                          text=True, timeout=140, cwd=ROOT,
                          env=ompi.environment(openmpi, {"HPCRL_CRASH_LOG": str(log)}))
    assert done.returncode == 0, done.stderr[-3000:]
    progress = check_learnt(run_dir, log)
    assert {row["live_collectors"] for row in progress} == {"3"}  # no collector was lost


@pytest.mark.timeout(150)
@pytest.mark.parametrize("rate", list(RATES))
def test_a_synchronous_job_whose_envs_crash_at_random_learns(tmp_path, rate):
    run_dir, log = tmp_path / "run", tmp_path / "crashes.log"
    done = run(2, ["train", "--run-dir", str(run_dir)],
               # (seed 1 draws no crash at the lower rate in this job's 20k steps)
               FAST + ["scheme.preset=ddppo", *crashing(rate), *COMMON, "seed=2"],
               env={"HPCRL_CRASH_LOG": str(log)}, timeout=140)
    assert done.returncode == 0, done.stderr[-3000:]
    check_learnt(run_dir, log)
    assert os.path.exists(run_dir / "checkpoints" / "last.pt")
