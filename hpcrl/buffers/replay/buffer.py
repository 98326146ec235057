"""Uniform replay: a ring of independent transitions, sampled uniformly at random.

Rows come from :class:`~hpcrl.buffers.replay.transitions.Transitions` chunks (any number of
collectors); the buffer keeps them in preallocated numpy arrays (pages that were never
written take no memory) and samples into preallocated batch arrays, so a gradient step
costs one gather per field. Observations go to an observation store
(:mod:`hpcrl.buffers.replay.obs_store`): stacked uint8 frames are kept once each. Its contents,
position and generator are part of a checkpoint.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import torch

from hpcrl.buffers.replay.obs_store import make_obs_store
from hpcrl.buffers.replay.transitions import Transitions
from hpcrl.envs.state import from_plain, to_plain

REPLAY_STREAM = 0x5A3  # seeds the sampling generator apart from the envs'
FIELDS = ("actions", "rewards", "discounts")  # per-row arrays beside the observations


class ReplayBatch(NamedTuple):
    """Sampled transitions as tensors ``[B, ...]`` (valid until the next sample).

    ``weights`` are importance weights (None for uniform sampling) and ``indices`` the rows
    sampled, for :meth:`PrioritizedReplayBuffer.update_priorities`.
    """

    obs: torch.Tensor
    actions: torch.Tensor
    rewards: torch.Tensor
    discounts: torch.Tensor
    next_obs: torch.Tensor
    weights: torch.Tensor | None
    indices: np.ndarray

    def to(self, device: torch.device) -> ReplayBatch:
        """The batch on ``device`` (itself when it is there already): the replay lives in
        host memory, a GPU learner copies each batch it samples."""
        if device.type == "cpu":
            return self
        moved = {name: getattr(self, name).to(device, non_blocking=True)
                 for name in ("obs", "actions", "rewards", "discounts", "next_obs")}
        weights = None if self.weights is None else self.weights.to(device, non_blocking=True)
        return ReplayBatch(**moved, weights=weights, indices=self.indices)


def replay_generator(seed: int) -> np.random.Generator:
    """The replay's sampling generator for ``seed``, on a stream of its own (``REPLAY_STREAM``)
    apart from the envs' generators."""
    return np.random.default_rng([seed, REPLAY_STREAM])


class ReplayBuffer:
    """Holds up to ``capacity`` transitions; the oldest are overwritten first.

    Discrete actions are kept as int64 indices, Box actions as float32 rows.
    """

    def __init__(self, capacity: int, obs_shape: tuple[int, ...],
                 action_shape: tuple[int, ...], discrete: bool, seed: int,
                 obs_dtype: str = "float32") -> None:
        self.capacity, self.discrete = capacity, discrete
        self.obs_shape, self.obs_dtype = obs_shape, np.dtype(obs_dtype)
        self.observations = make_obs_store(capacity, obs_shape, obs_dtype)
        self.actions = np.zeros((capacity,) + action_shape, np.int64 if discrete else np.float32)
        self.rewards = np.zeros(capacity, np.float32)
        self.discounts = np.zeros(capacity, np.float32)
        self.pos = 0
        self.size = 0
        self.rng = replay_generator(seed)
        self._batch_size = -1
        self._out: dict[str, np.ndarray] = {}

    def __len__(self) -> int:
        return self.size

    def nbytes(self) -> int:
        """Bytes this replay holds (observations as stored, then the per-row arrays)."""
        return self.observations.nbytes() + sum(getattr(self, n).nbytes for n in FIELDS)

    # -- writing -----------------------------------------------------------------------------
    def add(self, chunk: Transitions) -> np.ndarray:
        """Append the valid rows of ``chunk`` (with the initial priorities it carries, if
        any); returns the rows they were written to."""
        k = chunk.count
        priorities = chunk.priorities[:k] if chunk.layout.priorities else None
        return self.add_rows(chunk.obs[:k], chunk.actions[:k], chunk.rewards[:k],
                             chunk.discounts[:k], chunk.next_obs[:k], priorities)

    def add_rows(self, obs: np.ndarray, actions: np.ndarray, rewards: np.ndarray,
                 discounts: np.ndarray, next_obs: np.ndarray,
                 priorities: np.ndarray | None = None) -> np.ndarray:
        """Append transitions given as arrays of equal length (``priorities``: their
        initial replay priorities, for a prioritised buffer)."""
        k = len(rewards)
        if k > self.capacity:  # only the newest fit; they land where they would have
            keep = slice(k - self.capacity, k)
            obs, actions, rewards = obs[keep], actions[keep], rewards[keep]
            discounts, next_obs = discounts[keep], next_obs[keep]
            priorities = None if priorities is None else priorities[keep]
            self.pos = (self.pos + k - self.capacity) % self.capacity
            k = self.capacity
        rows = (self.pos + np.arange(k)) % self.capacity
        if self.pos + k <= self.capacity:
            where: Any = slice(self.pos, self.pos + k)
        else:
            where = rows
        self.observations.write(where, obs, next_obs)
        self.actions[where] = actions
        self.rewards[where] = rewards
        self.discounts[where] = discounts
        self.pos = (self.pos + k) % self.capacity
        self.size = min(self.size + k, self.capacity)
        self._written(rows, priorities)
        return rows

    def _written(self, rows: np.ndarray, priorities: np.ndarray | None) -> None:
        """Hook for subclasses: ``rows`` were just (over)written (uniform replay ignores
        ``priorities``)."""

    # -- sampling ----------------------------------------------------------------------------
    def _gather(self, indices: np.ndarray) -> dict[str, torch.Tensor]:
        b = len(indices)
        if b != self._batch_size:
            self._out = {name: np.empty((b,) + getattr(self, name).shape[1:],
                                        getattr(self, name).dtype) for name in FIELDS}
            for name in ("obs", "next_obs"):
                self._out[name] = np.empty((b,) + self.obs_shape, self.obs_dtype)
            self._batch_size = b
        tensors = {}
        for name in FIELDS:
            out = self._out[name]
            np.take(getattr(self, name), indices, axis=0, out=out)
            tensors[name] = torch.from_numpy(out)
        self.observations.gather(indices, self._out["obs"], self._out["next_obs"])
        tensors["obs"] = torch.from_numpy(self._out["obs"])
        tensors["next_obs"] = torch.from_numpy(self._out["next_obs"])
        return tensors

    def sample(self, batch_size: int, beta: float = 1.0) -> ReplayBatch:
        """``batch_size`` transitions drawn uniformly with replacement (``beta`` is unused)."""
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        indices = self.rng.integers(0, self.size, batch_size)
        return ReplayBatch(**self._gather(indices), weights=None, indices=indices)

    def update_priorities(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        """Uniform replay keeps no priorities."""

    # -- checkpoints -------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The filled rows as tensors, the write position and the sampling generator."""
        n = self.size
        state: dict[str, Any] = {"pos": self.pos, "size": n, "rng": to_plain(self.rng)}
        state.update(self._rows_state(n))
        return state

    def _rows_state(self, n: int) -> dict[str, torch.Tensor]:
        """Rows ``[0, n)`` of every field and of the observations, as tensors."""
        state = {name: torch.from_numpy(getattr(self, name)[:n].copy()) for name in FIELDS}
        state.update(self.observations.state_dict(n))
        return state

    def _load_rows(self, state: dict[str, Any], n: int) -> None:
        """Rows ``[0, n)`` from :meth:`_rows_state`, and the sampling generator."""
        if n > self.capacity:
            raise ValueError(f"checkpoint holds {n} transitions but replay.buffer_size is "
                             f"{self.capacity}; resume with the run's buffer size")
        for name in FIELDS:
            getattr(self, name)[:n] = state[name].numpy()
        self.observations.load_state_dict(state, n)
        self.rng = from_plain(state["rng"], self.rng)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`; a checkpoint of a prioritised or hindsight replay, or one
        larger than ``replay.buffer_size``, raises ValueError."""
        n = int(state["size"])
        if "priorities" in state and type(self) is ReplayBuffer:
            raise ValueError("checkpoint holds a prioritised replay; replay.prioritized changed "
                             "since it was written")
        if "her" in state:
            raise ValueError("checkpoint holds a hindsight replay; replay.her_strategy changed "
                             "since it was written (resume with it set)")
        self._load_rows(state, n)
        self.pos, self.size = int(state["pos"]), n
