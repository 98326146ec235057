"""Under MPI a NaN from one env stops the whole job: the rank that met it names itself, the
env (its global index) and its step, and the last good checkpoint, which stays loadable."""
import re

import pytest
import torch
from mpirun import column, run

from hpcrl.runtime.checkpoint import load_checkpoint

BAD_ENV = "env.id=hpcrl_testenvs:NonFiniteCartPole-v0"
FAST = ["train.tensorboard=false", "train.eval_episodes=0", "train.log_interval_s=60",
        "env.num_envs=4", "algo.num_steps=16", "train.checkpoint_every=2",
        "train.total_env_steps=20000"]


def stops_naming_env_and_checkpoint(n: int, tmp_path, sets: list[str], rank: int,
                                    after: int) -> None:
    """Global env 5 (seed 0 + 5: the second env of the second collecting rank) goes NaN at
    its step ``after``."""
    run_dir = tmp_path / "run"
    bad = {"HPCRL_TEST_BAD_AFTER": str(after), "HPCRL_TEST_BAD_SEEDS": "5",
           "HPCRL_TEST_BAD_WHAT": "obs"}
    done = run(n, ["train", "--run-dir", str(run_dir)], FAST + [BAD_ENV] + sets, env=bad,
               timeout=150)
    assert done.returncode != 0
    err = " ".join(done.stderr.split())
    assert f"hpcrl: rank {rank} (" in err
    assert ("env 1 (global env index 5) returned a non-finite observation (nan) at its step "
            f"{after}") in err, err[-3000:]
    path = run_dir / "checkpoints" / "last.pt"
    named = re.search(rf"the last good checkpoint is {re.escape(str(path))} \(update (\d+),", err)
    assert named, err[-3000:]
    state = load_checkpoint(path)
    assert 2 <= int(named.group(1)) <= state["counters"]["updates"]
    for name, tensor in state["policy"]["state_dict"].items():
        if tensor.is_floating_point():
            assert torch.isfinite(tensor).all(), name
    evaluated = run(1, ["eval", str(run_dir), "--episodes", "1"], [], timeout=60)
    assert evaluated.returncode == 0, evaluated.stderr[-2000:]


@pytest.mark.timeout(180)
def test_ddppo_stops_on_a_nan_observation_of_one_rank(tmp_path):
    stops_naming_env_and_checkpoint(2, tmp_path, ["scheme.preset=ddppo", "scheme.allreduce=mpi",
                                                  "algo.ppo.minibatch_size=32"], rank=1, after=100)


@pytest.mark.timeout(180)
def test_apex_stops_on_a_nan_observation_of_one_collector(tmp_path):
    stops_naming_env_and_checkpoint(3, tmp_path, ["scheme.preset=apex",
                                                  "replay.learning_starts=64",
                                                  "replay.batch_size=32"], rank=2,
                                    after=400)  # collectors run ahead of the learner's rows


@pytest.mark.timeout(180)
def test_ddppo_skip_update_drops_an_overflowing_gradient_on_every_rank_and_goes_on(tmp_path):
    run_dir = tmp_path / "run"
    bad = {"HPCRL_TEST_BAD_AFTER": "100", "HPCRL_TEST_BAD_SEEDS": "5",
           "HPCRL_TEST_BAD_WHAT": "huge_reward"}  # one finite 1e30 reward on rank 1 only
    sets = FAST + [BAD_ENV, "scheme.preset=ddppo", "scheme.allreduce=mpi",
                   "algo.ppo.minibatch_size=32", "train.total_env_steps=1280",
                   "train.on_nonfinite=skip_update"]
    done = run(2, ["train", "--run-dir", str(run_dir)], sets, env=bad, timeout=150)
    assert done.returncode == 0, done.stderr[-3000:]
    skipped = column(run_dir, "skipped_updates")
    assert sum(skipped) > 0 and skipped[-1] == 0
    state = load_checkpoint(run_dir / "checkpoints" / "last.pt")
    assert state["counters"]["env_steps"] == 1280  # 10 updates: the bad one is the 7th
    for name, tensor in state["policy"]["state_dict"].items():
        if tensor.is_floating_point():
            assert torch.isfinite(tensor).all(), name
