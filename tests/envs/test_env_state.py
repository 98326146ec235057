"""Env state capture: restored envs continue exactly as the originals."""
import gymnasium as gym
import numpy as np
import pytest

from hpcrl.config import from_dict
from hpcrl.envs.vector import make_vector_env, restore_vector_env_state, vector_env_state


@pytest.mark.parametrize("vectorization", ["sync", "async"])
def test_vector_env_state_round_trip(vectorization):
    cfg = from_dict({}, [f"env.vectorization={vectorization}", "env.num_envs=2",
                         "algo.ppo.minibatch_size=64"]).env
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
    from hpcrl.envs.state import capture_env_state
    env = gym.make("CartPole-v1")
    env.unwrapped.handle = object()
    _, missing = capture_env_state(env)
    assert missing == ["CartPoleEnv.handle (object)"]


def test_numpy_values_round_trip_with_their_types():
    import io

    import torch

    from hpcrl.envs.state import from_plain, to_plain
    from hpcrl.runtime.checkpoint import unloadable_value
    values = {"f64": np.float64(1.25), "f32": np.float32(-2.5), "i64": np.int64(-7),
              "u8": np.uint8(200), "flag": np.bool_(True), "text": np.str_("ab"),
              "dtype": np.dtype("float32"), "scalar_type": np.int16,
              "array": np.arange(6, dtype=np.uint16).reshape(2, 3),
              "big_endian": np.array([1.5, 2.5], dtype=">f8"), "bools": np.array([True, False]),
              "nested": (np.float64(3.0), [np.int32(4)], {"k": np.float64(5.0)})}
    plain = to_plain(values)
    assert unloadable_value(plain) is None
    buffer = io.BytesIO()
    torch.save(plain, buffer)
    buffer.seek(0)
    back = from_plain(torch.load(buffer, weights_only=True))
    for key in ("f64", "f32", "i64", "u8", "flag", "text"):
        assert type(back[key]) is type(values[key]) and back[key] == values[key], key
    assert back["dtype"] == np.dtype("float32") and isinstance(back["dtype"], np.dtype)
    assert back["scalar_type"] is np.int16
    for key in ("array", "big_endian", "bools"):
        assert back[key].dtype == values[key].dtype, key
        np.testing.assert_array_equal(back[key], values[key])
    f, (i,), d = back["nested"]
    assert (type(f), type(i), type(d["k"])) == (np.float64, np.int32, np.float64)


def test_values_without_a_plain_form_are_left_out_with_the_reason():
    import enum

    from hpcrl.envs.state import capture_env_state

    class Phase(enum.IntEnum):
        LANDING = 1
    env = gym.make("CartPole-v1")
    env.unwrapped.phase = Phase.LANDING  # an int subclass would pickle as its class
    env.unwrapped.names = np.array(["a", "b"])
    env.unwrapped.record = np.zeros(1, dtype=[("x", "f4"), ("y", "i4")])[0]
    _, missing = capture_env_state(env)
    assert missing == ["CartPoleEnv.phase (Phase)", "CartPoleEnv.names (array of dtype <U1)",
                       "CartPoleEnv.record (numpy scalar of dtype [('x', '<f4'), ('y', '<i4')])"]


def test_a_zero_dimensional_array_keeps_its_shape_through_a_checkpoint():
    """ascontiguousarray makes a 0-d array 1-d; to_plain puts the shape back (PPO+D saves
    the scalar actions of the episodes it is recording)."""
    import numpy as np

    from hpcrl.envs.state import from_plain, to_plain

    back = from_plain(to_plain((np.array(3, np.int64), np.zeros((2, 0), np.float32))))
    assert back[0].shape == () and back[0].dtype == np.int64 and int(back[0]) == 3
    assert back[1].shape == (2, 0)
