"""Prioritised replay (Schaul et al. 2016), proportional variant, over a sum-tree.

Row ``i`` is sampled with probability ``P(i) = p_i^alpha / sum_k p_k^alpha``; new rows get
the largest priority seen so far, so each is replayed at least once soon. Samples are
stratified (one uniform draw in each of ``B`` equal slices of the total). The importance
weights ``w_i = (N * P(i))^-beta / max_k w_k`` undo the bias of non-uniform sampling;
the learner anneals ``beta`` towards 1 over training.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from hpcrl.buffers.replay.buffer import ReplayBatch, ReplayBuffer
from hpcrl.buffers.replay.sumtree import SumTree


class PrioritizedReplayBuffer(ReplayBuffer):
    """A :class:`ReplayBuffer` that samples rows in proportion to ``priority^alpha``."""

    def __init__(self, capacity: int, obs_shape: tuple[int, ...],
                 action_shape: tuple[int, ...], discrete: bool, seed: int, alpha: float,
                 eps: float = 1e-6, obs_dtype: str = "float32") -> None:
        super().__init__(capacity, obs_shape, action_shape, discrete, seed, obs_dtype)
        self.alpha, self.eps = alpha, eps
        self.tree = SumTree(capacity)
        self.max_priority = 1.0
        self._weights = np.empty(0, np.float32)

    def _written(self, rows: np.ndarray, priorities: np.ndarray | None) -> None:
        """New rows get the priorities they came with (computed by their collector), or
        else the largest priority seen so far."""
        if priorities is not None:
            self.update_priorities(rows, priorities)
        else:
            self.tree.update(rows, np.full(len(rows), self.max_priority ** self.alpha))

    def sample(self, batch_size: int, beta: float = 1.0) -> ReplayBatch:
        """``batch_size`` rows by priority, with importance weights for exponent ``beta``."""
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        total = self.tree.total
        u = (np.arange(batch_size) + self.rng.random(batch_size)) * (total / batch_size)
        indices = np.minimum(self.tree.find(u), self.size - 1)
        probs = self.tree.get(indices) / total
        weights = (self.size * probs) ** -beta / (self.size * self.tree.min / total) ** -beta
        if self._weights.shape != (batch_size,):
            self._weights = np.empty(batch_size, np.float32)
        self._weights[:] = weights
        return ReplayBatch(**self._gather(indices), weights=torch.from_numpy(self._weights),
                           indices=indices)

    def update_priorities(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        """New priorities (e.g. ``|TD error|``) of sampled rows; ``eps`` keeps them > 0."""
        p = np.abs(np.asarray(priorities, np.float64)) + self.eps
        self.max_priority = max(self.max_priority, float(p.max()))
        self.tree.update(indices, p ** self.alpha)

    def state_dict(self) -> dict[str, Any]:
        """The uniform replay's state plus the rows' priorities and the running maximum."""
        state = super().state_dict()
        state["priorities"] = torch.from_numpy(self.tree.get(np.arange(self.size)).copy())
        state["max_priority"] = self.max_priority
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`, rebuilding the sum-tree; a uniform replay's checkpoint
        raises ValueError."""
        super().load_state_dict(state)
        if "priorities" not in state:
            raise ValueError("checkpoint holds a uniform replay; replay.prioritized changed "
                             "since it was written")
        self.tree = SumTree(self.capacity)
        if self.size:
            self.tree.update(np.arange(self.size), state["priorities"].numpy())
        self.max_priority = float(state["max_priority"])
