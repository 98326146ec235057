"""A sparse goal task in Gymnasium-Robotics' form that needs nothing to install.

``hpcrl.tasks:PointReach-v0`` moves a point in ``[-1, 1]^dim`` (``dim`` 2 by default, an
``env.kwargs`` key) towards a goal drawn uniformly in the same cube at every reset. An
action in ``[-1, 1]^dim`` moves the point by ``step_size`` times itself (clipped to the
cube). The reward is sparse, as in Fetch: ``-1`` at every step that ends farther than
``distance_threshold`` from the goal, else ``0``; episodes are cut after 50 steps
(truncation, never termination), and ``info["is_success"]`` says whether the step ended
within reach. Observations are the ``Dict`` of goal-conditioned envs
(``observation``: the point; ``achieved_goal``: the point; ``desired_goal``: the goal), and
:meth:`PointReach.compute_reward` takes batches of goals, as hindsight replay calls it.

Uniform random play ends within reach of the goal in about 1% of the episodes; the task is
what a test needs to show that hindsight replay learns where plain replay does not, in
seconds, with nothing but numpy.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

ENV_ID = "hpcrl.tasks:PointReach-v0"
MAX_EPISODE_STEPS = 50


class PointReach(gym.Env):
    """Reach a goal point with a point mass; sparse ``-1`` / ``0`` rewards."""

    metadata = {"render_modes": []}

    def __init__(self, dim: int = 2, step_size: float = 0.1,
                 distance_threshold: float = 0.05) -> None:
        if dim < 1 or step_size <= 0 or distance_threshold <= 0:
            raise ValueError(f"PointReach needs dim >= 1, step_size > 0 and "
                             f"distance_threshold > 0, got {dim}, {step_size}, "
                             f"{distance_threshold}")
        self.dim, self.step_size = int(dim), float(step_size)
        self.distance_threshold = float(distance_threshold)
        box = gym.spaces.Box(-1.0, 1.0, (self.dim,), np.float32)
        self.observation_space = gym.spaces.Dict(
            {"observation": box, "achieved_goal": box, "desired_goal": box})
        self.action_space = gym.spaces.Box(-1.0, 1.0, (self.dim,), np.float32)
        self.pos = np.zeros(self.dim, np.float32)
        self.goal = np.zeros(self.dim, np.float32)

    def _obs(self) -> dict[str, np.ndarray]:
        return {"observation": self.pos.copy(), "achieved_goal": self.pos.copy(),
                "desired_goal": self.goal.copy()}

    def _success(self) -> float:
        return float(np.linalg.norm(self.pos - self.goal) <= self.distance_threshold)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Draw the point and the goal uniformly in the cube (from the env's generator)."""
        super().reset(seed=seed)
        self.pos = self.np_random.uniform(-1.0, 1.0, self.dim).astype(np.float32)
        self.goal = self.np_random.uniform(-1.0, 1.0, self.dim).astype(np.float32)
        return self._obs(), {"is_success": self._success()}

    def step(self, action: np.ndarray) -> tuple[dict[str, np.ndarray], float, bool, bool,
                                                dict[str, Any]]:
        """Move the point by ``step_size x`` the clipped action (staying in the cube) and pay the
        sparse reward; never ends an episode itself (the registered time limit cuts it)."""
        move = np.clip(np.asarray(action, np.float32), -1.0, 1.0) * self.step_size
        self.pos = np.clip(self.pos + move, -1.0, 1.0).astype(np.float32)
        reward = float(self.compute_reward(self.pos, self.goal, {}))
        return self._obs(), reward, False, False, {"is_success": self._success()}

    def compute_reward(self, achieved_goal: np.ndarray, desired_goal: np.ndarray,
                       info: Any) -> np.ndarray:
        """``-1`` where the achieved goal is farther than ``distance_threshold`` from the
        desired one, else ``0``; goals ``[..., dim]``, rewards ``[...]``."""
        distance = np.linalg.norm(np.asarray(achieved_goal) - np.asarray(desired_goal),
                                  axis=-1)
        return -(distance > self.distance_threshold).astype(np.float32)

