"""Stacked uint8 frames are stored once each in the replay, and come back exactly."""
import numpy as np
import pytest

from hpcrl.buffers.replay.buffer import ReplayBuffer
from hpcrl.buffers.replay.obs_store import DenseObsStore, FrameObsStore
from hpcrl.buffers.replay.prioritized import PrioritizedReplayBuffer

K, H, W = 4, 6, 5


def stacked_stream(rng, steps, envs, episode_len):
    """(obs, next_obs) rows as a frame-stacking env with reset padding gives them, envs
    interleaved step by step, one-step targets; episodes end every ``episode_len`` steps
    (the next obs is then the final frame's stack, the following row starts a new game)."""
    stacks = [None] * envs
    obs, next_obs = [], []
    for t in range(steps):
        for e in range(envs):
            if t % episode_len == 0:
                first = rng.integers(0, 255, (H, W), dtype=np.uint8)
                stacks[e] = np.stack([first] * K)
            new = rng.integers(0, 255, (H, W), dtype=np.uint8)
            following = np.concatenate([stacks[e][1:], new[None]])
            obs.append(stacks[e])
            next_obs.append(following)
            stacks[e] = following
    return np.stack(obs), np.stack(next_obs)


def fill(buffer, obs, next_obs, chunk=7):
    for start in range(0, len(obs), chunk):
        end = min(start + chunk, len(obs))
        n = end - start
        buffer.add_rows(obs[start:end], np.zeros(n, np.int64), np.arange(n, dtype=np.float32),
                        np.ones(n, np.float32), next_obs[start:end])


def all_rows(buffer):
    b = buffer.size
    out_obs = np.empty((b, K, H, W), np.uint8)
    out_next = np.empty_like(out_obs)
    buffer.observations.gather(np.arange(b), out_obs, out_next)
    return out_obs, out_next


def test_frames_come_back_exactly_and_each_is_kept_once_through_wrap_around():
    rng = np.random.default_rng(0)
    capacity, envs, episode_len = 64, 3, 10
    obs, next_obs = stacked_stream(rng, 90, envs, episode_len)  # 270 rows: wraps 4 times
    frames = ReplayBuffer(capacity, (K, H, W), (), True, 0, "uint8")
    assert isinstance(frames.observations, FrameObsStore)
    fill(frames, obs, next_obs)
    newest = slice(len(obs) - capacity, len(obs))
    rows = (np.arange(len(obs))[newest]) % capacity  # where the newest rows landed
    got_obs, got_next = all_rows(frames)
    np.testing.assert_array_equal(got_obs[rows], obs[newest])
    np.testing.assert_array_equal(got_next[rows], next_obs[newest])
    # one new frame per transition, the first frame of each game, and the stacks' tails
    episodes = capacity // episode_len + 2 * envs
    assert frames.observations.pool.live <= capacity + episodes + (K - 1) * envs
    assert frames.observations.pool.live >= capacity
    dense = DenseObsStore(capacity, (K, H, W), "uint8").nbytes()
    assert frames.observations.pool.live * H * W < dense / 4


def test_samples_equal_those_of_a_replay_storing_whole_observations():
    rng = np.random.default_rng(1)
    obs, next_obs = stacked_stream(rng, 40, 2, 7)
    frames = PrioritizedReplayBuffer(50, (K, H, W), (), True, 3, alpha=0.6, obs_dtype="uint8")
    dense = PrioritizedReplayBuffer(50, (K, H, W), (), True, 3, alpha=0.6, obs_dtype="uint8")
    dense.observations = DenseObsStore(50, (K, H, W), "uint8")
    fill(frames, obs, next_obs)
    fill(dense, obs, next_obs)
    for _ in range(3):
        a, b = frames.sample(16), dense.sample(16)
        np.testing.assert_array_equal(a.indices, b.indices)
        assert a.obs.dtype == b.obs.dtype == __import__("torch").uint8
        np.testing.assert_array_equal(a.obs.numpy(), b.obs.numpy())
        np.testing.assert_array_equal(a.next_obs.numpy(), b.next_obs.numpy())


def test_a_checkpoint_keeps_each_frame_once_and_restores_every_row():
    rng = np.random.default_rng(2)
    obs, next_obs = stacked_stream(rng, 30, 2, 9)
    replay = ReplayBuffer(40, (K, H, W), (), True, 0, "uint8")
    fill(replay, obs, next_obs)
    state = replay.state_dict()
    assert "obs" not in state and len(state["frames"]) == replay.observations.pool.live
    again = ReplayBuffer(40, (K, H, W), (), True, 0, "uint8")
    again.load_state_dict(state)
    for got, want in zip(all_rows(again), all_rows(replay), strict=False):
        np.testing.assert_array_equal(got, want)
    assert again.observations.pool.live == replay.observations.pool.live
    dense = ReplayBuffer(40, (K * H * W,), (), True, 0, "uint8")
    with pytest.raises(ValueError, match="shared frames"):
        dense.load_state_dict(state)


def test_a_checkpoint_of_whole_stacks_resumes_into_shared_frames():
    """A run whose checkpoint was written when the replay stored whole observations."""
    rng = np.random.default_rng(3)
    obs, next_obs = stacked_stream(rng, 20, 2, 6)
    old = ReplayBuffer(40, (K, H, W), (), True, 0, "uint8")
    old.observations = DenseObsStore(40, (K, H, W), "uint8")
    fill(old, obs, next_obs)
    state = old.state_dict()
    assert "obs" in state and "frames" not in state
    new = ReplayBuffer(40, (K, H, W), (), True, 0, "uint8")
    new.load_state_dict(state)
    for got, want in zip(all_rows(new), all_rows(old), strict=False):
        np.testing.assert_array_equal(got, want)
    assert new.observations.pool.live < 2 * len(obs)


def test_vector_observations_stay_whole():
    assert isinstance(ReplayBuffer(8, (4,), (), True, 0).observations, DenseObsStore)
    assert isinstance(ReplayBuffer(8, (10, 10, 4), (), True, 0, "bool").observations,
                      DenseObsStore)
