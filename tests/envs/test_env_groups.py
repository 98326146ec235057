"""``scheme.env_groups``: a collector's envs in groups that take turns give the same rollouts,
transition chunks and weights as one batch of envs, for both families, recurrent actors,
envs stepped in this process or in subprocesses (whose steps the groups overlap), and a
run killed and resumed in groups ends as a whole one does. Acting on an inference rank
with groups is in tests/placement/mpi/test_inference_ranks.py."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from kill_resume import rows, whole_then_killed_and_resumed

from hpcrl.build import env_groups, env_spaces, make_actor, rollout_layout
from hpcrl.collection.collector import rollout_collector
from hpcrl.config import from_dict
from hpcrl.envs.scripted import collector_env_groups
from hpcrl.placement.serial_run import Trainer
from hpcrl.runtime.checkpoint import load_checkpoint
from hpcrl.runtime.run_dir import RunDir

# A group's forward multiplies fewer rows at once than the whole batch's, and BLAS picks
# another kernel for another row count: values and log-probs differ in their last bit,
# except where each row is computed alone (an MLP actor-critic's numpy engine in a
# deterministic job, train.deterministic at its default: EXACT, bit for bit). Adam turns a
# gradient near its eps (1e-5 by default) into a step of up to lr, so such a bit could move
# a weight by lr; with eps 1e-3 the step stays linear in it and the groupings' weights
# agree to 1e-7 (the same departure as tests/placement/mpi/mpirun.py's ROUNDING_SAFE_ADAM).
ROUNDING_SAFE_ADAM = "algo.optimizer_eps=1e-3"
EXACT = {"ppo", "ppo-subprocess-envs"}
TINY = ["env.num_envs=4", "algo.num_steps=16", "algo.ppo.minibatch_size=32",
        "algo.ppo.num_epochs=2", "train.total_env_steps=1024", "train.eval_episodes=0",
        "train.tensorboard=false", "train.checkpoint_every=100", ROUNDING_SAFE_ADAM]
DQN = ["algo.name=dqn", "env.num_envs=4", "algo.num_steps=32", "replay.learning_starts=64",
       "replay.batch_size=16", "train.total_env_steps=768", "train.eval_episodes=0",
       "train.tensorboard=false", "actor.hidden_sizes=[32]"]
SAC = ["algo.name=sac", "env.id=Pendulum-v1", "env.num_envs=2", "algo.num_steps=16",
       "replay.learning_starts=32", "replay.batch_size=16", "train.total_env_steps=160",
       "train.eval_episodes=0", "train.tensorboard=false", "actor.hidden_sizes=[16]"]


def trained(tmp_path: Path, name: str, sets: list[str]) -> dict[str, torch.Tensor]:
    Trainer(from_dict({}, sets), RunDir(tmp_path / name), console=None).train()
    return load_checkpoint(RunDir(tmp_path / name).checkpoint_path)["policy"]["state_dict"]


def assert_same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor],
                exact: bool = False) -> None:
    assert a.keys() == b.keys()
    for key in a:
        if exact:
            assert torch.equal(b[key], a[key]), key
        else:
            torch.testing.assert_close(b[key], a[key], rtol=1e-4, atol=1e-6)


AGENTS = {
    "ppo": TINY,
    "ppo-gru-normalised": TINY + ["actor.memory=gru", "actor.memory_size=8",
                                  "env.normalize_obs=true", "env.normalize_reward=true"],
    "ppo-subprocess-envs": TINY + ["env.vectorization=async"],
    "dqn": DQN,
    "sac": SAC,
}


@pytest.mark.parametrize("agent", AGENTS, ids=list(AGENTS))
def test_two_groups_train_the_weights_of_one(tmp_path, agent):
    sets = AGENTS[agent]
    one = trained(tmp_path, "one", sets + ["scheme.env_groups=1"])
    two = trained(tmp_path, "two", sets + ["scheme.env_groups=2"])
    assert_same(one, two, exact=agent in EXACT)
    first, second = rows(tmp_path / "one"), rows(tmp_path / "two")
    for a, b in zip(first, second, strict=True):  # the same episodes, the same losses
        assert a.keys() == b.keys()
        if agent in EXACT:
            assert {k: v for k, v in a.items() if "time" not in k and k != "fps"} == {
                k: v for k, v in b.items() if "time" not in k and k != "fps"}
            continue
        for key in a.keys() - {"clip_fraction"}:  # (a count of ratios beyond a clip range
            # that the schedule takes to 0 at the end: rounding flips it there)
            # (a GRU's torch kernels round a batch of 2 rows otherwise than one of 4)
            assert float(b[key]) == pytest.approx(float(a[key]), rel=1e-3, abs=1e-6,
                                                  nan_ok=True), key


def test_a_group_per_env_collects_the_rollout_of_one_batch():
    cfg = from_dict({}, TINY + ["env.normalize_obs=true"])
    spaces = env_spaces(cfg)
    rollouts = []
    for groups in (1, 4):
        torch.manual_seed(0)
        actor = make_actor(cfg, spaces)
        envs = collector_env_groups(cfg.env, 0, groups)
        assert len(envs.groups) == groups and envs.num_envs == 4
        collector = rollout_collector(envs, actor, cfg.env, cfg.algo.gamma, cfg.seed)
        rollouts.append(collector.collect(rollout_layout(cfg, spaces, 4).new()))
        envs.close()
    one, four = rollouts
    for field in ("obs", "actions", "rewards", "terminated", "truncated", "episode_returns"):
        np.testing.assert_array_equal(getattr(four, field), getattr(one, field), field)
    for field in ("log_probs", "values", "next_values"):  # a forward of 1 row, not 4
        np.testing.assert_allclose(getattr(four, field), getattr(one, field), rtol=0,
                                   atol=1e-6)
    four.facts.set(seconds=0.0)  # (the one fact of a rollout that is not its data)
    one.facts.set(seconds=0.0)
    np.testing.assert_array_equal(four.header, one.header)


def test_subprocess_envs_overlap_and_auto_takes_two_groups_there():
    cfg = from_dict({}, TINY + ["env.vectorization=async"])
    assert env_groups(cfg, remote=False) == 2
    assert env_groups(from_dict({}, TINY), remote=False) == 1  # nothing to overlap
    assert env_groups(from_dict({}, TINY), remote=True) == 2  # an inference rank acts
    assert env_groups(from_dict({}, TINY + ["env.num_envs=3", "algo.ppo.minibatch_size=24"]),
                      remote=True) == 1  # 3 envs do not split evenly
    envs = collector_env_groups(cfg.env, 0, 2)
    assert envs.asynchronous  # its groups' steps are started and waited for apart
    envs.close()


def test_a_run_killed_and_resumed_in_groups_ends_like_a_whole_one(tmp_path, monkeypatch):
    """Every group's envs, generators and recurrent states go into the checkpoint."""
    cfg = from_dict({}, AGENTS["ppo-gru-normalised"] + ["scheme.env_groups=2",
                                                        "train.checkpoint_every=4"])
    whole, cut = whole_then_killed_and_resumed(cfg, tmp_path, monkeypatch, 6)
    a = load_checkpoint(RunDir(whole).checkpoint_path)["policy"]["state_dict"]
    b = load_checkpoint(RunDir(cut).checkpoint_path)["policy"]["state_dict"]
    for key in a:
        assert torch.equal(a[key], b[key]), key
    assert rows(whole) == rows(cut)


@pytest.mark.parametrize("groups, message", [
    (3, "'scheme.env_groups' (3) must divide env.num_envs (4)"),
    (-1, "'scheme.env_groups' must be >= 0"),
])
def test_groups_that_do_not_fit_are_refused(groups, message):
    from hpcrl.config.loader import ConfigError

    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        from_dict({}, TINY + [f"scheme.env_groups={groups}"])
