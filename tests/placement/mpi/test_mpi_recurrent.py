"""Recurrent agents on the memory task, from the CLI as a user runs them: a GRU remembers
the cue and solves it, an MLP cannot beat chance; asynchronous collection ships each
rollout's states with it (async-ppo, impala), and ``hpcrl eval`` carries the state through
whole episodes."""
from __future__ import annotations

import json

import pytest
from mpirun import run, train

CUE = ["env.id=hpcrl_testenvs:CueMemory-v0", "train.eval_episodes=100", "seed=1"]
GRU = ["actor.memory=gru", "actor.memory_size=32"]


def eval_return(run_dir) -> float:
    return json.loads((run_dir / "eval.json").read_text())["mean_return"]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_gru_solves_the_memory_task_and_an_mlp_does_not(tmp_path):
    budget = ["train.total_env_steps=20000", "algo.ppo.num_epochs=4"]
    train(1, tmp_path / "gru", CUE + GRU + budget)
    train(1, tmp_path / "mlp", CUE + budget)
    assert eval_return(tmp_path / "gru") >= 0.95  # 100 games, the cue recalled in all
    assert abs(eval_return(tmp_path / "mlp")) <= 0.3  # chance: 0 +- 0.1 over 100 games
    done = run(1, ["eval", str(tmp_path / "gru"), "--episodes", "50", "--json"], [])
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["mean_return"] >= 0.95


# async-ppo recalls the cue in every game by about 12k steps (evaluated at 1.0 in 3 runs of
# 16k); impala by about 70k
@pytest.mark.timeout(300)
@pytest.mark.parametrize("n,sets", [
    (3, ["scheme.preset=async-ppo", "train.total_env_steps=16384", "algo.ppo.num_epochs=4"]),
    (3, ["scheme.preset=impala", "train.total_env_steps=80000"]),
], ids=["async-ppo", "impala"])
def test_asynchronous_collectors_ship_states_with_their_rollouts(tmp_path, n, sets):
    train(n, tmp_path / "run", CUE + GRU + sets)
    assert eval_return(tmp_path / "run") >= 0.9


# (ddppo, async-ppo and impala: the tests above; a2c: tests/placement/mpi/test_inference_ranks.py's
# test_acting_on_an_inference_rank_reaches_the_weights_of_acting_on_the_collectors[gru],
# on the a2c job it runs anyway, the same check without a launch of its own)
@pytest.mark.timeout(120)
@pytest.mark.parametrize("n,sets", [
    (5, ["scheme.preset=async-ppo", "scheme.update=central", "scheme.gradients=async",
         "scheme.gradient_workers=2", "scheme.collectors_per_worker=1", "actor.memory=lstm"]),
], ids=["a3c-like-lstm"])
def test_every_scheme_carries_the_state_into_its_checkpoint(tmp_path, n, sets):
    import torch

    # 8 updates of 128 steps, checkpointed every 2: the states gathered mid-run and at the end
    train(n, tmp_path, ["actor.memory=gru", "actor.memory_size=16", "env.num_envs=4",
                        "algo.ppo.minibatch_size=64", "train.total_env_steps=1024",
                        "train.checkpoint_every=2", *sets])
    saved = torch.load(tmp_path / "checkpoints" / "last.pt", weights_only=True)
    collectors = saved["placement"]["collectors"]
    states = torch.cat([c["memory"] for c in collectors])
    per_core = 16 * (2 if "actor.memory=lstm" in sets else 1)
    assert states.shape == (4 * len(collectors), 2 * per_core)
    assert states.abs().sum() > 0  # CartPole episodes outlive a rollout: states carried on
