"""Hindsight replay: relabelling against hand-computed references, episode bookkeeping at
the ring's wrap and for running episodes, checkpoints, and the config's refusals."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from her_episodes import CODEC, DIM, FMT, achieved_after, episode, replay

from hpcrl.buffers.replay.goals import GoalRewards, goal_env_problem
from hpcrl.buffers.replay.her import HerReplayBuffer
from hpcrl.config import from_dict
from hpcrl.errors import ConfigError
from hpcrl.sections.schema import EnvConfig
from hpcrl.tasks.point_reach import PointReach


@pytest.mark.parametrize("strategy", ["future", "final", "episode"])
def test_relabelled_goals_come_from_the_rows_episode_by_the_strategy(strategy):
    buf = replay(strategy)
    # stream 0: an episode of 5 steps (points 1..5 after its steps), then one of 4 (11..14)
    # still running; stream 1: an episode of 3 steps (101..103)
    buf.add_stream(0, *episode(5, 0.0, 50.0))
    buf.add_stream(1, *episode(3, 100.0, 50.0))
    buf.add_stream(0, *episode(4, 10.0, 60.0, end_last=False))
    batch = buf.sample(4000)
    n = int(4000 * 4 / 5)
    obs, next_obs = batch.obs.numpy(), batch.next_obs.numpy()
    desired = CODEC.read(obs, "desired_goal")[:, 0]
    assert np.array_equal(desired, CODEC.read(next_obs, "desired_goal")[:, 0])
    here = CODEC.read(obs, "achieved_goal")[:, 0]
    # each row's episode, as [first achieved-after, last achieved-after] values
    first = np.where(here < 5, 1.0, np.where(here < 100, 11.0, 101.0))
    last = np.where(here < 5, 5.0, np.where(here < 100, 14.0, 103.0))
    goal = desired[:n]
    if strategy == "final":
        assert np.array_equal(goal, last[:n])
    elif strategy == "future":
        assert np.all(goal >= here[:n] + 1) and np.all(goal <= last[:n])
        # every later step of the episode, and the row's own outcome, is drawn
        row = (here[:n] == 0)  # first step of stream 0's finished episode
        assert set(goal[row]) == {1.0, 2.0, 3.0, 4.0, 5.0}
    else:
        assert np.all(goal >= first[:n]) and np.all(goal <= last[:n])
        row = (here[:n] == 3)  # a late step still gets goals from the episode's start
        assert set(goal[row]) == {1.0, 2.0, 3.0, 4.0, 5.0}
    # real rows keep their goals and rewards
    assert set(desired[n:]) <= {50.0, 60.0}
    assert np.all(batch.rewards.numpy()[n:] == -1.0)
    # relabelled rewards are the env's compute_reward of (next achieved, new goal)
    reward = PointReach(dim=DIM).compute_reward(CODEC.read(next_obs[:n], "achieved_goal"),
                                                CODEC.read(obs[:n], "desired_goal"), {})
    assert np.array_equal(batch.rewards.numpy()[:n], reward)
    assert (reward == 0).any() and (reward == -1).any()


def test_a_share_k_over_k_plus_one_of_each_batch_is_relabelled():
    for k, expected in ((1, 50), (4, 80)):
        buf = replay("final", k=k)
        buf.add_stream(0, *episode(5, 0.0, 50.0))
        desired = CODEC.read(buf.sample(100).obs.numpy(), "desired_goal")[:, 0]
        assert np.count_nonzero(desired != 50.0) == expected


def test_episodes_across_chunks_and_the_rings_wrap_keep_their_bounds():
    buf = replay("episode", capacity=8, streams=1)  # one ring of 8 rows
    for part in range(3):  # one episode of 9 steps in three chunks: 0..8
        obs, act, rew, disc, nxt, ends = episode(3, 3.0 * part, 50.0, end_last=part == 2)
        buf.add_stream(0, obs, act, rew, disc, nxt, ends)
    assert buf.written[0] == 9 and len(buf) == 8
    rows = buf.rows_of(0, np.arange(1, 9))  # step 0 was overwritten
    assert np.all(buf.ep_first[rows] == 0) and np.all(buf.ep_last[rows] == 8)
    goals = buf.goal_steps(np.zeros(2000, np.int64), np.full(2000, 4))
    assert set(goals) == set(range(1, 9))  # only held steps, the episode's whole rest
    # a new episode running: its rows reach only the steps so far
    buf.add_stream(0, *episode(2, 20.0, 60.0, end_last=False))
    assert buf.ep_last[buf.rows_of(0, 10)] == -1
    assert set(buf.goal_steps(np.zeros(500, np.int64), np.full(500, 9))) == {9, 10}
    assert achieved_after(buf, 0, 10) == 22.0


def test_chunks_from_collectors_go_to_their_streams():
    from hpcrl.buffers.replay.transitions import TransitionLayout

    buf = replay("future", capacity=40, streams=4)
    chunk = TransitionLayout(6, FMT.shape, (DIM,), obs_dtype=FMT.dtype, streams=True).new()
    obs, act, rew, disc, nxt, ends = episode(3, 0.0, 50.0)
    for t in range(3):  # envs 2 and 3 of a collector, interleaved as it steps them
        chunk.append(obs[[t, t]], act[[t, t]], rew[[t, t]], disc[[t, t]], nxt[[t, t]],
                     np.array([2, 3]), ends[[t, t]])
    buf.add(chunk)
    assert list(buf.written) == [0, 0, 3, 3]
    assert achieved_after(buf, 3, 2) == 3.0 and buf.ep_last[buf.rows_of(2, 0)] == 2
    bad = TransitionLayout(1, FMT.shape, (DIM,), obs_dtype=FMT.dtype, streams=True).new()
    bad.append(obs[:1], act[:1], rew[:1], disc[:1], nxt[:1], np.array([4]), ends[:1])
    with pytest.raises(ValueError, match="env count changed"):
        buf.add(bad)


class TerminatingReach(PointReach):
    """PointReach whose episode ends where the goal is reached (compute_terminated)."""

    def compute_terminated(self, achieved_goal, desired_goal, info):
        return self.compute_reward(achieved_goal, desired_goal, info) == 0


def test_an_env_defining_compute_terminated_sets_relabelled_discounts():
    gym.register("hpcrl_test/TerminatingReach-v0", entry_point=TerminatingReach,
                 max_episode_steps=50)
    buf = HerReplayBuffer(64, FMT, (DIM,), 0, 1, "future", 4, 0.9,
                          GoalRewards(EnvConfig(id="hpcrl_test/TerminatingReach-v0")))
    buf.add_stream(0, *episode(5, 0.0, 50.0))
    batch = buf.sample(200)
    n = 160
    rewards, discounts = batch.rewards.numpy()[:n], batch.discounts.numpy()[:n]
    assert np.array_equal(discounts == 0.0, rewards == 0.0)
    assert np.all(discounts[rewards != 0] == np.float32(0.9))
    assert np.all(batch.discounts.numpy()[n:] == np.float32(0.99))  # real rows as stored


def test_a_resumed_replay_samples_and_relabels_the_same_batches():
    buf = replay("future", capacity=12, streams=2)
    buf.add_stream(0, *episode(5, 0.0, 50.0))
    buf.add_stream(1, *episode(9, 100.0, 50.0))  # wraps its ring of 6
    buf.add_stream(0, *episode(3, 10.0, 60.0, end_last=False))
    buf.sample(32)
    state = buf.state_dict()
    again = replay("future", capacity=12, streams=2, seed=7)
    again.load_state_dict(state)
    for _ in range(3):
        a, b = buf.sample(64), again.sample(64)
        for name in ("obs", "next_obs", "rewards", "discounts", "actions"):
            assert torch.equal(getattr(a, name), getattr(b, name)), name
    for name in ("written", "current_first"):
        assert np.array_equal(getattr(buf, name), getattr(again, name))
    with pytest.raises(ValueError, match="env count"):
        replay("future", capacity=12, streams=3).load_state_dict(state)
    from hpcrl.buffers.replay.buffer import ReplayBuffer
    with pytest.raises(ValueError, match="her_strategy changed"):
        ReplayBuffer(12, FMT.shape, (DIM,), False, 0, FMT.dtype).load_state_dict(state)


# -- refusals ----------------------------------------------------------------------------
def config(*overrides: str):
    return from_dict({}, ["env.id=hpcrl.tasks:PointReach-v0", "algo.name=sac",
                          "replay.her_strategy=future", *overrides])


@pytest.mark.parametrize("overrides, words", [
    (["algo.name=dqn"], "relabels the replay of sac, td3, ddpg, mpo"),
    (["algo.name=ppo"], "relabels the replay of"),
    (["replay.n_step=3"], "set replay.n_step=1"),
    (["replay.prioritized=true"], "set replay.prioritized=false"),
    (["replay.her_k=0"], "replay.her_k' must be >= 1"),
    (["replay.her_strategy=none", "replay.her_k=8"], "read by hindsight replay only"),
    (["env.num_envs=8", "replay.buffer_size=4", "replay.batch_size=2"],
     "one ring per env of the job, 8 here"),
])
def test_impossible_her_settings_are_refused_naming_the_fix(overrides, words):
    with pytest.raises(ConfigError) as err:
        config(*overrides)
    assert words in str(err.value), err.value


def test_her_strategy_takes_only_the_known_strategies():
    with pytest.raises(ConfigError, match="her_strategy"):
        config("replay.her_strategy=later")


class NoReward(PointReach):
    compute_reward = None  # type: ignore[assignment]


class ScalarReward(PointReach):
    def compute_reward(self, achieved_goal, desired_goal, info):
        return float(np.linalg.norm(achieved_goal - desired_goal) < 0.05)


@pytest.mark.parametrize("env_id, words", [
    ("Pendulum-v1", "needs a goal-conditioned env observing a Dict"),
    ("hpcrl_test/NoReward-v0", "has no compute_reward"),
    ("hpcrl_test/ScalarReward-v0", "make it vectorised"),
])
def test_envs_that_cannot_be_relabelled_are_refused(env_id, words):
    for name, cls in (("NoReward", NoReward), ("ScalarReward", ScalarReward)):
        if f"hpcrl_test/{name}-v0" not in gym.registry:
            gym.register(f"hpcrl_test/{name}-v0", entry_point=cls, max_episode_steps=50)
    env = gym.make(env_id)
    try:
        problem = goal_env_problem(EnvConfig(id=env_id), env.observation_space)
    finally:
        env.close()
    assert problem is not None and words in problem, problem


def test_a_non_goal_env_is_refused_in_one_line_from_the_cli(tmp_path):
    from click.testing import CliRunner

    from hpcrl.cli import main

    out = CliRunner().invoke(main, ["train", "--run-dir", str(tmp_path / "r"), "--set",
                                    "algo.name=sac", "--set", "env.id=Pendulum-v1", "--set",
                                    "replay.her_strategy=final"])
    assert out.exit_code == 1 and "Traceback" not in out.output
    assert "replay.her_strategy" in out.output and "observation" in out.output
    assert len(out.output.strip().splitlines()) == 1, out.output


def test_another_goal_env_goes_on_top_of_the_her_recipe():
    from pathlib import Path

    from hpcrl.algorithms import make_policy
    from hpcrl.build import env_spaces
    from hpcrl.config.loader import load_config

    if "hpcrl_test/TerminatingReach-v0" not in gym.registry:
        gym.register("hpcrl_test/TerminatingReach-v0", entry_point=TerminatingReach,
                     max_episode_steps=50)
    recipe = Path(__file__).resolve().parents[2] / "examples" / "her-sac.yaml"
    for overrides in (["env.id=hpcrl_test/TerminatingReach-v0"], ["env.kwargs={dim: 3}"]):
        cfg = load_config(recipe, overrides)
        spaces = env_spaces(cfg)
        policy = make_policy(cfg, spaces)
        dim = 3 if "dim" in overrides[0] else DIM
        obs = {key: np.zeros((4, dim), np.float32) for key in ("observation", "achieved_goal",
                                                               "desired_goal")}
        assert policy(obs).shape == (4, dim)


def test_mpo_trains_on_a_hindsight_replay(tmp_path):
    from quiet_training import train_quietly

    trainer = train_quietly(tmp_path, [
        "env.id=hpcrl.tasks:PointReach-v0", "algo.name=mpo", "replay.her_strategy=episode",
        "algo.mpo.action_samples=4", "actor.hidden_sizes=[16]", "algo.num_steps=100",
        "replay.batch_size=16", "replay.learning_starts=100", "train.total_env_steps=300"])
    replay = trainer.learner.updates.learner.replay
    assert isinstance(replay, HerReplayBuffer) and replay.written[0] == 300
    assert trainer.learner.updates.learner.version == 200  # one gradient step per env step
