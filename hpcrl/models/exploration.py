"""Exploration of the off-policy collectors: epsilon schedule and action-noise processes.

Noise is drawn from per-env generators (env ``i`` of the job has its own), so the actions an
env sees do not depend on how envs are spread over processes. Noise lives in the policy's
``[-1, 1]`` action space.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch


def standard_normal(rngs: list[np.random.Generator], steps: int, dim: int) -> np.ndarray:
    """``[steps, num_envs, dim]`` standard normals, env ``i``'s from ``rngs[i]``."""
    return np.stack([rng.standard_normal((steps, dim), dtype=np.float32) for rng in rngs],
                    axis=1)


class GaussianNoise:
    """Independent ``N(0, std^2)`` noise on every step."""

    def __init__(self, num_envs: int, action_dim: int, std: float) -> None:
        self.std = np.float32(std)

    def step(self, innovation: np.ndarray, cols: slice = slice(None)) -> np.ndarray:
        """The noise of one step of the envs ``cols`` from their standard normals
        ``[envs, action_dim]``."""
        return self.std * innovation

    def reset(self, done: np.ndarray, cols: slice = slice(None)) -> None:
        """Gaussian noise has no state to reset."""

    def state_dict(self) -> dict[str, Any]:
        """``{}``: Gaussian noise has no state."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Nothing to restore."""


class OrnsteinUhlenbeckNoise:
    """Temporally correlated noise ``x += theta * (0 - x) * dt + std * sqrt(dt) * N(0, 1)``,
    reset to 0 when an env's episode ends."""

    def __init__(self, num_envs: int, action_dim: int, std: float, theta: float,
                 dt: float) -> None:
        self.theta, self.dt = theta, dt
        self.scale = np.float32(std * math.sqrt(dt))
        self.x = np.zeros((num_envs, action_dim), np.float32)

    def step(self, innovation: np.ndarray, cols: slice = slice(None)) -> np.ndarray:
        """Advance the processes of the envs ``cols`` one step with their standard normals
        ``innovation`` ``[envs, action_dim]``; returns a copy of their new noise."""
        x = self.x[cols]
        x += np.float32(-self.theta * self.dt) * x + self.scale * innovation
        return x.copy()

    def reset(self, done: np.ndarray, cols: slice = slice(None)) -> None:
        """Zero the processes of the envs ``cols`` that ``done`` marks (their episode
        ended)."""
        self.x[cols][done] = 0.0

    def state_dict(self) -> dict[str, Any]:
        """The processes' values ``x`` ``[num_envs, action_dim]``, for a checkpoint."""
        return {"x": torch.from_numpy(self.x.copy())}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the values :meth:`state_dict` saved (in place)."""
        self.x[...] = state["x"].numpy()


ActionNoise = GaussianNoise | OrnsteinUhlenbeckNoise


def make_noise(kind: str, num_envs: int, action_dim: int, std: float, theta: float,
               dt: float) -> ActionNoise | None:
    """The noise process named by ``algo.td3.action_noise`` or ``algo.ddpg.action_noise``
    (None for 'none')."""
    if kind == "none":
        return None
    if kind == "ornstein_uhlenbeck":
        return OrnsteinUhlenbeckNoise(num_envs, action_dim, std, theta, dt)
    return GaussianNoise(num_envs, action_dim, std)
