"""Headers as named-field records: a rollout's facts and its normaliser moments (packed by
the one moments record the gradient info also uses), a transition chunk's facts; both still
cross processes as one float64 array, so a copy of that array carries every field."""
import numpy as np

from hpcrl.buffers.replay.transitions import TransitionLayout
from hpcrl.buffers.rollout import RolloutLayout
from hpcrl.numerics.normalization import Moments


def test_a_rollout_header_carries_its_facts_and_moments_in_one_float64_array():
    layout = RolloutLayout(num_steps=4, num_envs=2, obs_shape=(3, 2), action_shape=())
    assert layout.header_size == 7 + 1 + 2 * 6 + 3  # facts, obs (count, mean, m2), returns
    rollout = layout.new()
    rng = np.random.default_rng(0)
    obs = Moments(8.0, rng.normal(size=(3, 2)), rng.random((3, 2)))
    ret = Moments(3.0, np.float64(1.5), np.float64(0.25))
    rollout.set_facts(3, 17, 4, 2, 0.5, env_restarts=2)
    rollout.set_moments(obs, ret)
    copy = layout.new()
    copy.header[:] = rollout.header  # what a transport moves
    assert (copy.valid_steps, copy.weights_version, copy.env_offset, copy.source,
            copy.collect_seconds, copy.env_restarts) == (3, 17, 4, 2, 0.5, 2)
    (count, mean, m2), ret_back = copy.moments()
    assert count == 8.0 and mean.shape == (3, 2)
    np.testing.assert_array_equal(mean, obs.mean)
    np.testing.assert_array_equal(m2, obs.m2)
    assert tuple(map(float, ret_back)) == (3.0, 1.5, 0.25)


def test_a_transition_chunk_header_names_its_facts():
    layout = TransitionLayout(capacity=8, obs_shape=(2,), action_shape=())
    chunk = layout.new()
    chunk.set_facts(weights_version=5, env_offset=6, source=1, env_steps=12, seconds=0.25,
                    env_restarts=1)
    chunk.append(np.ones((3, 2)), np.zeros(3), np.ones(3), np.ones(3), np.ones((3, 2)))
    chunk.add_episodes(np.array([4.0]), np.array([9.0]))
    copy = layout.new()
    copy.data[:], copy.header[:] = chunk.data, chunk.header
    assert (copy.count, copy.weights_version, copy.env_offset, copy.source, copy.episodes,
            copy.env_steps, copy.collect_seconds, copy.env_restarts) == (3, 5, 6, 1, 1, 12, 0.25,
                                                                        1)
    copy.reset()
    assert copy.count == 0 and copy.episodes == 0
