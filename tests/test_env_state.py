"""Env state capture: restored envs continue exactly as the originals."""
import gymnasium as gym
import numpy as np
import pytest

from hpcrl.config import from_dict
from hpcrl.core.envs import make_vector_env, restore_vector_env_state, vector_env_state


@pytest.mark.parametrize("vectorization", ["sync", "async"])
def test_vector_env_state_round_trip(vectorization):
    cfg = from_dict({}, [f"env.vectorization={vectorization}", "env.num_envs=2",
                         "algo.minibatch_size=64"]).env
    a, b = make_vector_env(cfg, 2), make_vector_env(cfg, 2)
    try:
        a.reset(seed=[1, 2])
        b.reset(seed=[7, 8])
        for _ in range(30):
            a.step(np.array([0, 1]))
        states, missing = vector_env_state(a)
        assert missing == []
        restore_vector_env_state(b, states)
        actions = np.random.default_rng(0).integers(0, 2, (200, 2))
        for act in actions:  # episodes end and auto-reset from the restored RNGs too
            oa, ra, ta, ua, _ = a.step(act)
            ob, rb, tb, ub, _ = b.step(act)
            np.testing.assert_array_equal(oa, ob)
            np.testing.assert_array_equal(ta, tb)
    finally:
        a.close()
        b.close()


def test_uncapturable_state_is_reported():
    from hpcrl.core.env_state import capture_env_state
    env = gym.make("CartPole-v1")
    env.unwrapped.handle = object()
    _, missing = capture_env_state(env)
    assert missing == ["CartPoleEnv.handle (object)"]
