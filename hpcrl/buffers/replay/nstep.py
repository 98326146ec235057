"""Online n-step transitions: each env step in, finished n-step windows out.

A collector feeds every vector step to an :class:`NStepWindow`; it emits the transition that
starts ``n`` steps back once its window is full, and every pending transition of an env at
once when that env's episode ends (shorter windows). What it emits over a stream of steps
equals :func:`hpcrl.buffers.returns.nstep` on the same steps (tests check this), except that windows
still open when the stream stops stay pending (they are emitted later, not cut short).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

Rows = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


class NStepWindow:
    """Pending windows of ``num_envs`` envs: up to ``n`` per env, in a ring of slots."""

    def __init__(self, n: int, gamma: float, num_envs: int, obs_shape: tuple[int, ...],
                 action_shape: tuple[int, ...], obs_dtype: str = "float32") -> None:
        if n < 1:
            raise ValueError(f"n-step window needs n >= 1, got {n}")
        self.n, self.gamma, self.num_envs = n, gamma, num_envs
        self.powers = gamma ** np.arange(n + 1, dtype=np.float64)
        shape = (num_envs, n)
        self.obs = np.zeros(shape + obs_shape, obs_dtype)
        self.actions = np.zeros(shape + action_shape, np.float32)
        self.returns = np.zeros(shape, np.float64)
        self.age = np.zeros(shape, np.int64)
        self.valid = np.zeros(shape, bool)
        self.head = 0  # every env pushes every step, so one ring position serves all

    def push(self, obs: np.ndarray, actions: np.ndarray, rewards: np.ndarray,
             terminated: np.ndarray, truncated: np.ndarray, next_obs: np.ndarray,
             skip: np.ndarray | None = None) -> Rows:
        """Add one step of every env; returns the finished rows
        ``(obs, actions, rewards, discounts, next_obs)``.

        ``next_obs[i]`` is the observation that followed the step in env ``i``'s episode (its
        final observation when the step ended the episode). ``skip`` marks envs whose step
        is no transition (an env that failed in it: :meth:`cut` ended its windows first).
        """
        done = terminated | truncated
        keep = None if skip is None or not skip.any() else ~skip
        if self.n == 1:
            discounts = np.where(terminated, 0.0, self.gamma).astype(np.float32)
            if keep is None:
                return obs, actions, rewards.astype(np.float32), discounts, next_obs
            return (obs[keep], actions[keep], rewards[keep].astype(np.float32),
                    discounts[keep], next_obs[keep])
        h = self.head
        self.obs[:, h] = obs
        self.actions[:, h] = actions
        self.returns[:, h] = 0.0
        self.age[:, h] = 0
        self.valid[:, h] = True if keep is None else keep
        self.returns += np.where(self.valid, self.powers[self.age] * rewards[:, None], 0.0)
        self.age += self.valid
        emit = self.valid & (done[:, None] | (self.age == self.n))
        self.head = (h + 1) % self.n
        if not emit.any():
            return self._empty(obs, actions, next_obs)
        envs = np.nonzero(emit)[0]
        ages = self.age[emit]
        discounts = np.where(terminated[envs], 0.0, self.powers[ages]).astype(np.float32)
        rows = (self.obs[emit], self.actions[emit], self.returns[emit].astype(np.float32),
                discounts, next_obs[envs])
        self.valid &= ~emit
        return rows

    def cut(self, envs: np.ndarray, final_obs: np.ndarray) -> Rows:
        """End the pending windows of ``envs`` (a mask) as truncated at ``final_obs`` (every
        env's observation, the row of each cut env read): their episode was cut, so each
        window bootstraps from the last observation the env gave, ``gamma ** age`` ahead."""
        emit = self.valid & envs[:, None]
        if self.n == 1 or not emit.any():
            return self._empty(self.obs[:, 0], self.actions[:, 0], final_obs)
        rows = (self.obs[emit], self.actions[emit], self.returns[emit].astype(np.float32),
                self.powers[self.age[emit]].astype(np.float32),
                final_obs[np.nonzero(emit)[0]])
        self.valid &= ~emit
        return rows

    @staticmethod
    def _empty(obs: np.ndarray, actions: np.ndarray, next_obs: np.ndarray) -> Rows:
        none = np.zeros(0, np.float32)
        return obs[:0], actions[:0], none, none, next_obs[:0]

    @property
    def pending(self) -> int:
        """Transitions waiting for their window to fill."""
        return int(self.valid.sum())

    def state_dict(self) -> dict[str, Any]:
        """The windows' head and pending rows (copies), for a checkpoint."""
        return {"head": self.head, "obs": torch.from_numpy(self.obs.copy()),
                "actions": torch.from_numpy(self.actions.copy()),
                "returns": torch.from_numpy(self.returns.copy()),
                "age": torch.from_numpy(self.age.copy()),
                "valid": torch.from_numpy(self.valid.copy())}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` in place; windows of another shape (``env.num_envs`` or
        ``replay.n_step`` changed) raise ValueError."""
        if tuple(state["valid"].shape) != self.valid.shape:
            raise ValueError(f"checkpoint holds n-step windows of shape "
                             f"{tuple(state['valid'].shape)}, this collector needs "
                             f"{self.valid.shape}: env.num_envs or replay.n_step changed")
        self.head = int(state["head"])
        for name in ("obs", "actions", "returns", "age", "valid"):
            getattr(self, name)[...] = state[name].numpy()
