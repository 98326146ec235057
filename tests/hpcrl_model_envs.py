"""Tiny envs for the model-based tests: a point that supplies its own planning reward, and
one that observes pixels."""
import gymnasium as gym
import numpy as np
import torch


class HookedPoint(gym.Env):
    """A point on a line moved by its action, ``x' = x + 0.2 a``, rewarded ``-x'^2`` (the
    goal is 0), 40 steps an episode. It gives planners its reward (``planning_reward``)."""

    observation_space = gym.spaces.Box(-5.0, 5.0, (1,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.x = self.np_random.uniform(-1.0, 1.0, 1).astype(np.float32)
        self.t = 0
        return self.x.copy(), {}

    def step(self, action):
        self.x = np.clip(self.x + 0.2 * np.clip(action, -1, 1), -5, 5).astype(np.float32)
        self.t += 1
        return self.x.copy(), float(-self.x[0] ** 2), False, self.t >= 40, {}

    def planning_reward(self, obs, actions, next_obs):
        return -next_obs[:, 0] ** 2


def point_reward(obs, actions, next_obs):
    """HookedPoint's reward, as a user's function (``algo.mpc.reward_fn``)."""
    return -next_obs[:, 0] ** 2


def wrong_shape_reward(obs, actions, next_obs):
    """A reward function that returns a column, not one reward per row."""
    return torch.zeros(len(obs), 2)


class PixelPoint(HookedPoint):
    """HookedPoint observed as an 8x8 RGB image."""

    observation_space = gym.spaces.Box(0, 255, (8, 8, 3), np.uint8)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros((8, 8, 3), np.uint8), {}

    def step(self, action):
        _, reward, terminated, truncated, info = super().step(action)
        return np.zeros((8, 8, 3), np.uint8), reward, terminated, truncated, info


gym.register("HookedPoint-v0", entry_point=HookedPoint)
gym.register("PixelPoint-v0", entry_point=PixelPoint)
