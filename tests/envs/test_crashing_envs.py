"""The crashing-env test like RLlib's (issue 46), in one process: every env of a PPO job on
CartPole crashes at random in step and reset, at a tenth of RLlib's rates and at RLlib's own
(0.0005 a step, 0.005 a reset). The job finishes its budget, every crash is survived and
counted, and the policy learns; an off-policy (DQN) job's crashes are counted too. The
multi-rank jobs are in tests/placement/mpi/test_mpi_crashing_envs.py.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "placement" / "mpi"))  # the failing envs' module
from hpcrl_crashing import RATES, crashing, faults_logged, restarts_counted  # noqa: E402

from hpcrl.config import from_dict  # noqa: E402
from hpcrl.placement.serial_run import Trainer  # noqa: E402
from hpcrl.runtime.run_dir import RunDir  # noqa: E402

BUDGET = 20000


@pytest.mark.timeout(120)
@pytest.mark.parametrize("rate", list(RATES))
def test_a_serial_job_whose_envs_crash_at_random_learns_cartpole(tmp_path, monkeypatch, rate):
    log = tmp_path / "crashes.log"
    monkeypatch.setenv("HPCRL_CRASH_LOG", str(log))
    trainer = Trainer(from_dict({}, crashing(rate) + [
        f"train.total_env_steps={BUDGET}", "train.eval_episodes=5", "train.tensorboard=false",
        "seed=1"]), RunDir(tmp_path / "run"), console=None)
    evaluation = trainer.train()
    assert trainer.writer.done  # its whole budget
    trained, evaluated = restarts_counted(str(tmp_path / "run"))
    faults = faults_logged(str(log))
    assert faults > 0 and trained + evaluated == faults  # every crash survived and counted
    assert evaluation is not None and evaluation["mean_return"] >= 150, evaluation  # random: ~20


@pytest.mark.timeout(60)
def test_an_off_policy_job_whose_envs_crash_counts_every_crash_and_finishes(tmp_path,
                                                                            monkeypatch):
    log = tmp_path / "crashes.log"
    monkeypatch.setenv("HPCRL_CRASH_LOG", str(log))
    trainer = Trainer(from_dict({}, [
        "algo.name=dqn", "env.id=hpcrl_crashing:CrashingCartPole-v0",
        "env.kwargs={p_crash: 0.004, p_crash_reset: 0.02}", "train.total_env_steps=2000",
        "replay.learning_starts=1000", "train.eval_episodes=1", "train.tensorboard=false",
        "seed=1"]), RunDir(tmp_path / "run"), console=None)
    trainer.train()
    assert trainer.writer.done
    trained, evaluated = restarts_counted(str(tmp_path / "run"))
    assert trained > 3 and trained + evaluated == faults_logged(str(log))
