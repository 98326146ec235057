"""PPO+D: demonstrations replayed in fixed env slots teach PPO a task it does not solve
alone; the replay slots play the file's rows exactly, the agent's own good episodes join
the buffer, the learner rates the replayed actions under its own weights, a killed run
resumes exactly, and what cannot work is refused before training."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from kill_resume import rows, whole_then_killed_and_resumed

from hpcrl.algorithms.demo_replay import (
    DemoSlots,
    demo_slots,
    replayed_log_probs,
    slots_of_collector,
)
from hpcrl.buffers.demos.episodes import DemoBuffer, Episode
from hpcrl.build import env_spaces, make_actor, rollout_layout
from hpcrl.collection.collector import rollout_collector
from hpcrl.config import from_dict
from hpcrl.envs.vector import make_vector_env
from hpcrl.errors import ConfigError
from hpcrl.placement.serial_run import Trainer
from hpcrl.runtime.checkpoint import load_checkpoint
from hpcrl.runtime.run_dir import RunDir
from hpcrl.tasks.corridor import record_walk

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "examples" / "demos" / "corridor-walk.npz"
CORRIDOR = ["env.id=hpcrl.tasks:Corridor-v0", "env.num_envs=8", "algo.num_steps=64",
            "algo.ppo.minibatch_size=128", "algo.ppo.num_epochs=4", "algo.gamma=0.99",
            "algo.lr=3e-4", "algo.lr_schedule=constant", "algo.ent_coef=0.01",
            "train.total_env_steps=20000", "train.eval_episodes=10",
            "train.tensorboard=false", "train.checkpoint_every=1000"]


def _demos(tmp_path, episodes=1):
    path = tmp_path / "walk.npz"
    record_walk(str(path), episodes)
    return ["algo.ppo.demos=" + str(path)]


@pytest.mark.timeout(120)
def test_one_demonstration_teaches_ppo_the_corridor_plain_ppo_never_walks(tmp_path):
    """One scripted walk to the end, replayed in 2 of 8 env slots: PPO+D evaluates at 1.0
    after 20k env steps (seeds 0-2; from 10k steps on), plain PPO at 0.0 (seeds 0-5, also
    on 100k steps: tests/models/test_rnd.py's figures)."""
    demos = Trainer(from_dict({}, CORRIDOR + _demos(tmp_path)), RunDir(tmp_path / "d"),
                    console=None)
    figures = demos.train()
    plain = Trainer(from_dict({}, CORRIDOR), RunDir(tmp_path / "p"), console=None).train()
    print("PPO+D", figures, "plain", plain)
    assert figures["mean_return"] == pytest.approx(1.0)
    assert plain["mean_return"] == pytest.approx(0.0)
    replay = demos.learner.updates.source.collector.filler.replay
    assert replay.buffer.added > 0 and replay.buffer.own  # its own walks joined


def test_the_shipped_recipe_file_is_the_scripted_walk(tmp_path):
    record_walk(str(tmp_path / "walk.npz"), 1)
    shipped, fresh = np.load(SHIPPED), np.load(tmp_path / "walk.npz")
    assert sorted(shipped.files) == sorted(fresh.files)
    for key in shipped.files:
        np.testing.assert_array_equal(shipped[key], fresh[key])


def test_replay_slots_are_spread_by_global_index_whatever_the_layout():
    slots = demo_slots(16, 0.25)
    assert slots.sum() == 4 and list(np.flatnonzero(slots)) == [3, 7, 11, 15]
    halves = np.concatenate([slots_of_collector(16, 0.25, 0, 8),
                             slots_of_collector(16, 0.25, 8, 8)])
    np.testing.assert_array_equal(halves, slots)
    assert demo_slots(8, 0.1).sum() == 0


def _collector(tmp_path, sets=()):
    cfg = from_dict({}, CORRIDOR + _demos(tmp_path) + ["env.num_envs=4", "algo.num_steps=50",
                                                        "algo.ppo.demos_fraction=0.5",
                                                        "algo.ppo.minibatch_size=100",
                                                        *sets])
    spaces = env_spaces(cfg)
    slots = slots_of_collector(4, 0.5, 0, 4)
    envs = DemoSlots(make_vector_env(cfg.env, 2), slots,
                     DemoBuffer.from_file(cfg.algo.ppo.demos, cfg.algo.ppo.demos_own))
    actor = make_actor(cfg, spaces)
    return cfg, spaces, actor, rollout_collector(envs, actor, cfg.env, cfg.algo.gamma, cfg.seed,
                                         total_envs=4)


def test_a_replay_slot_plays_the_file_row_by_row_and_its_episodes_are_not_the_agents(
        tmp_path):
    cfg, spaces, actor, collector = _collector(tmp_path)
    rollout = collector.collect(rollout_layout(cfg, spaces, 4).new())
    walk = np.eye(40, dtype=np.float32)
    for slot in (1, 3):  # slots 1 and 3 of 4 replay: 39 rows, then the walk again
        cells = [t % 39 for t in range(50)]
        np.testing.assert_array_equal(rollout.obs[:, slot], walk[cells])
        np.testing.assert_array_equal(rollout.actions[:, slot], np.ones(50))
        np.testing.assert_array_equal(rollout.rewards[:, slot],
                                      [1.0 if t == 38 else 0.0 for t in range(50)])
        assert rollout.terminated[38, slot] == 1 and rollout.terminated[:38, slot].sum() == 0
        assert rollout.episode_lengths[:, slot].sum() == 0  # no episode of the agent's
    real = collector.envs.only.real
    assert real.num_envs == 2  # the replay slots step no env
    returns, _ = rollout.finished_episodes()
    assert len(returns) == 0  # 50 steps: the replays' two walks are not counted


def test_own_episodes_join_when_they_do_as_well_as_the_demonstrations():
    def episode(ret, length=3):
        rewards = np.zeros(length, np.float32)
        rewards[-1] = ret
        done = np.zeros(length, bool)
        done[-1] = True
        return Episode(np.zeros((length, 2), np.float32), np.zeros(length, np.int64),
                       rewards, done, np.zeros(length, bool))

    buffer = DemoBuffer([episode(1.0), episode(2.0)], own_capacity=2)
    assert not buffer.offer(episode(0.5))  # below the weakest demonstration
    assert buffer.offer(episode(1.0)) and buffer.offer(episode(3.0))
    assert buffer.offer(episode(1.5))  # full: evicts the worst own one (1.0)
    assert sorted(e.ret for e in buffer.own) == [1.5, 3.0]
    assert not buffer.offer(episode(1.2))  # worse than every own one held
    assert len(buffer.episodes) == 4 and buffer.added == 3
    assert not DemoBuffer([episode(1.0)], own_capacity=0).offer(episode(5.0))


def test_the_learner_rates_replayed_actions_under_its_own_weights(tmp_path):
    """Collectors stored the log-probs of actions they sampled but did not take in the
    replay slots; the learner replaces them there, and only there."""
    cfg, spaces, actor, collector = _collector(tmp_path)
    rollout = collector.collect(rollout_layout(cfg, spaces, 4).new())
    sampled = rollout.log_probs.copy()
    replayed_log_probs(actor, [rollout], demo_slots(4, 0.5))
    obs = torch.from_numpy(rollout.obs[:, 1])
    expected, _, _ = actor.evaluate(obs, torch.ones(50, dtype=torch.long))
    np.testing.assert_allclose(rollout.log_probs[:, 1], expected.detach().numpy(), rtol=1e-5)
    np.testing.assert_array_equal(rollout.log_probs[:, [0, 2]], sampled[:, [0, 2]])


@pytest.mark.timeout(120)
def test_a_killed_ppo_d_run_resumes_to_the_uninterrupted_weights(tmp_path, monkeypatch):
    """The replay slots' places and generators, the own episodes held and those being
    recorded are in the checkpoint."""
    cfg = from_dict({}, CORRIDOR + _demos(tmp_path) + [
        "train.total_env_steps=8192", "train.checkpoint_every=6", "train.eval_episodes=0",
        "algo.ppo.demos_own=2"])
    whole_then_killed_and_resumed(cfg, tmp_path, monkeypatch, 9)

    def weights(name):
        return load_checkpoint(RunDir(tmp_path / name).checkpoint_path)["policy"]["state_dict"]

    whole, cut = weights("whole"), weights("cut")
    for key in whole:
        assert torch.equal(whole[key], cut[key]), key
    assert rows(tmp_path / "whole") == rows(tmp_path / "cut")


@pytest.mark.parametrize("sets, words", [
    (["algo.name=a2c"], "not PPO"),
    (["actor.memory=gru"], "recurrent"),
    (["algo.ppo.demos_fraction=0.1"], "none of the job's 8 env slots"),
    (["algo.ppo.demos_fraction=1.0"], "no env slot"),
    (["env.num_envs=1", "scheme.preset=a2c", "algo.ppo.demos_fraction=0.5"], "every env of"),
])
def test_ppo_d_refuses_what_cannot_work_before_any_rank_starts(tmp_path, sets, words):
    with pytest.raises(ConfigError, match=words):
        from_dict({}, CORRIDOR + _demos(tmp_path) + sets)


def test_a_file_that_does_not_fit_the_env_is_refused_when_training_starts(tmp_path):
    bad = from_dict({}, _demos(tmp_path))  # CartPole observes 4 values, the walk 40
    with pytest.raises(ConfigError, match="obs rows have shape"):
        env_spaces(bad)
    missing = from_dict({}, ["algo.ppo.demos=" + str(tmp_path / "none.npz")])
    with pytest.raises(ConfigError, match="no file"):
        env_spaces(missing)


def test_a_demos_key_without_demonstrations_is_refused():
    with pytest.raises(ConfigError, match="algo.ppo.demos to a"):
        from_dict({}, ["algo.ppo.demos_fraction=0.5"])
