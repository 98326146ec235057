"""Rollout buffers, collection and the layout-independent minibatch order."""
import numpy as np
import pytest
import torch

from hpcrl.buffers.rollout import RolloutLayout
from hpcrl.buffers.rollout_storage import RolloutStorage
from hpcrl.build import env_spaces, make_actor, rollout_layout
from hpcrl.collection.collector import rollout_collector
from hpcrl.config import from_dict
from hpcrl.envs.vector import make_vector_env
from hpcrl.models.acting import make_engine


def collect(config, num_envs, env_offset=0, steps=None, rows_alone=False):
    spaces = env_spaces(config)
    envs = make_vector_env(config.env, num_envs)
    actor = make_actor(config, spaces)
    collector = rollout_collector(envs, actor, config.env, config.algo.gamma, config.seed,
                                  env_offset, engine=make_engine(actor, rows_alone=rows_alone))
    layout = rollout_layout(config, spaces, num_envs)
    rollout = collector.collect(
        layout.new(), should_stop=None if steps is None else (lambda done: done >= steps))
    envs.close()
    return rollout


def test_layout_views_share_one_buffer():
    layout = RolloutLayout(5, 3, (4,), ())
    r = layout.new()
    assert r.obs.shape == (5, 3, 4) and r.actions.shape == (5, 3) and r.values.shape == (5, 3)
    r.values[2, 1] = 7.0
    assert 7.0 in r.data  # a view, not a copy: the buffer is what travels
    assert r.data.size == layout.data_size and r.data.dtype == np.float32


def test_collected_rollout_is_consistent():
    cfg = from_dict({}, ["env.num_envs=3", "algo.num_steps=200", "algo.ppo.minibatch_size=150"])
    r = collect(cfg, 3)
    assert r.valid_steps == 200
    ends = (r.terminated + r.truncated) > 0
    assert ends.any(), "CartPole episodes end within 200 random-ish steps"
    returns, lengths = r.finished_episodes()
    assert len(returns) == ends.sum() and np.all(lengths >= 8)
    # CartPole gives reward 1 per step: an episode's return is its length
    np.testing.assert_allclose(returns, lengths)
    # next_values follows the gae contract: values[t+1] inside episodes, 0 at terminations
    inside = ~ends[:-1]
    np.testing.assert_array_equal(r.next_values[:-1][inside], r.values[1:][inside])
    assert np.all(r.next_values[r.terminated > 0] == 0)


def test_preempted_rollout_reports_valid_steps():
    cfg = from_dict({}, ["env.num_envs=2", "algo.num_steps=50", "algo.ppo.minibatch_size=20"])
    r = collect(cfg, 2, steps=17)
    assert r.valid_steps == 17
    assert np.all(r.values[17:] == 0)


def test_same_global_envs_give_same_columns_whatever_the_split():
    cfg = from_dict({}, ["env.num_envs=4", "algo.num_steps=40", "algo.ppo.minibatch_size=32"])
    whole = collect(cfg, 4)
    left, right = collect(cfg, 2, env_offset=0), collect(cfg, 2, env_offset=2)
    for name in ("obs", "actions", "log_probs", "rewards", "terminated", "next_values"):
        joined = np.concatenate([getattr(left, name), getattr(right, name)], axis=1)
        np.testing.assert_allclose(getattr(whole, name), joined, rtol=1e-6, atol=1e-6)


def test_rollouts_side_by_side_give_the_rows_of_one_rollout_bit_for_bit():
    """A deterministic job's collectors (each env's row acted on alone) of envs 0-1 and 2-3
    give one collector's rollout of envs 0-3, column for column and to the bit; a learner
    holding the two gives the whole batch and every minibatch of one holding the one, row
    for row, so its sums round alike: 2 ranks x 2 envs train the weights of 1 x 4."""
    cfg = from_dict({}, ["env.num_envs=4", "algo.num_steps=16", "algo.ppo.minibatch_size=16"])
    whole = collect(cfg, 4, rows_alone=True)
    left, right = collect(cfg, 2, 0, rows_alone=True), collect(cfg, 2, 2, rows_alone=True)
    for name in ("obs", "actions", "log_probs", "values", "rewards", "next_values"):
        joined = np.concatenate([getattr(left, name), getattr(right, name)], axis=1)
        assert np.array_equal(getattr(whole, name), joined), name
    one, two = RolloutStorage(0.99, 0.95), RolloutStorage(0.99, 0.95)
    one.load([whole])
    two.load([right, left])  # in any order of arrival

    def same(a, b):
        return all(torch.equal(x, y) for x, y in zip(a, b, strict=True) if x is not None)

    assert same(one.full_batch(), two.full_batch())
    for a, b in zip(one.minibatches(4, seed=5, total_envs=4),
                    two.minibatches(4, seed=5, total_envs=4), strict=True):
        assert same(a, b)


def test_storage_shapes_and_minibatches_cover_the_batch_once():
    cfg = from_dict({}, ["env.num_envs=4", "algo.num_steps=16", "algo.ppo.minibatch_size=16"])
    r = collect(cfg, 4)
    storage = RolloutStorage(cfg.algo.gamma, cfg.algo.gae_lambda)
    storage.load([r])
    full = storage.full_batch()
    assert full.obs.shape == (64, 4) and full.actions.dtype == torch.int64
    batches = list(storage.minibatches(4, seed=3, total_envs=4))
    assert [b.obs.shape[0] for b in batches] == [16] * 4
    seen = torch.cat([b.log_probs for b in batches]).sort().values
    torch.testing.assert_close(seen, full.log_probs.sort().values)  # a permutation of all


def test_minibatches_of_a_shard_are_the_shards_part_of_the_global_minibatch():
    cfg = from_dict({}, ["env.num_envs=4", "algo.num_steps=16", "algo.ppo.minibatch_size=16"])
    whole, left, right = collect(cfg, 4), collect(cfg, 2, 0), collect(cfg, 2, 2)
    def batches(rollout):
        s = RolloutStorage(0.99, 0.95)
        s.load([rollout])
        return list(s.minibatches(4, seed=11, total_envs=4))
    for g, a, b in zip(batches(whole), batches(left), batches(right), strict=False):
        # per minibatch: same samples, each shard contributes the same count
        assert a.obs.shape[0] == b.obs.shape[0] == g.obs.shape[0] // 2
        joined = torch.cat([a.log_probs, b.log_probs]).sort().values
        torch.testing.assert_close(joined, g.log_probs.sort().values)


def test_uneven_split_is_rejected():
    cfg = from_dict({}, ["env.num_envs=2", "algo.num_steps=10", "algo.ppo.minibatch_size=20"])
    s = RolloutStorage(0.99, 0.95)
    s.load([collect(cfg, 2)])
    with pytest.raises(ValueError, match="equal minibatches"):
        list(s.minibatches(3, seed=0, total_envs=2))


def test_a_preempted_rollout_still_gives_every_minibatch():
    cfg = from_dict({}, ["env.num_envs=2", "algo.num_steps=16", "algo.ppo.minibatch_size=8"])
    short = collect(cfg, 2, steps=15)  # 15 steps cannot be cut into 4 equal time slices
    s = RolloutStorage(0.99, 0.95)
    s.load([short])
    batches = list(s.minibatches(4, seed=1, total_envs=2))
    assert len(batches) == 4 and sum(b.obs.shape[0] for b in batches) == 30
