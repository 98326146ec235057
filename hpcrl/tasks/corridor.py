"""A corridor whose only reward lies at its far end: an exploration task in one dimension.

The agent starts at cell 0 of ``length`` cells and moves left or right (action 0 or 1; at
cell 0 moving left stays). Reaching the last cell pays 1 and ends the episode; every other
step pays 0, and an episode is cut after ``max_steps`` steps (default ``2 x length``). A
policy that acts at random needs about ``length**2`` steps to get there, so within the time
limit it almost never does, and a learner that waits for the reward waits in vain; a
learner paid for reaching cells it has not seen (RND) walks the corridor. The observation is
the one-hot position.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from hpcrl.buffers.demos.files import DemoRecorder


class Corridor(gym.Env):
    """``length`` cells, the reward at the last one (see the module's docstring)."""

    metadata = {"render_modes": []}

    def __init__(self, length: int = 40, max_steps: int | None = None) -> None:
        if length < 2:
            raise ValueError(f"a corridor needs at least 2 cells, got length={length}")
        self.length = int(length)
        self.max_steps = int(max_steps) if max_steps is not None else 2 * self.length
        self.observation_space = gym.spaces.Box(0.0, 1.0, (self.length,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.position = 0
        self.steps = 0

    def _obs(self) -> np.ndarray:
        obs = np.zeros(self.length, np.float32)
        obs[self.position] = 1.0
        return obs

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[np.ndarray, dict[str, Any]]:
        """Back to cell 0, the step count at 0."""
        super().reset(seed=seed)
        self.position, self.steps = 0, 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Move one cell (action 1 right, else left; walls hold); reaching the last cell pays 1
        and terminates, ``max_steps`` steps truncate."""
        move = 1 if int(action) == 1 else -1
        self.position = min(max(self.position + move, 0), self.length - 1)
        self.steps += 1
        reached = self.position == self.length - 1
        return (self._obs(), 1.0 if reached else 0.0, reached,
                not reached and self.steps >= self.max_steps, {})


def record_walk(path: str, episodes: int = 1, length: int = 40) -> int:
    """Write ``episodes`` demonstrations of the scripted walk to the end (always right) in
    the format of :mod:`hpcrl.buffers.demos.files` (what ``algo.ppo.demos`` reads); returns the rows
    written."""
    recorder = DemoRecorder(episodes)
    env = Corridor(length)
    for episode in range(episodes):
        obs, _ = env.reset(seed=episode)
        done = False
        while not done:
            next_obs, reward, terminated, truncated, _ = env.step(1)
            recorder.step(episode, obs, np.int64(1), reward, terminated, truncated)
            obs, done = next_obs, terminated or truncated
    return recorder.write(path)

