"""A sum-tree (with a min-tree beside it) over per-row priorities, vectorised in numpy.

Leaves hold the priorities; every inner node holds the sum (and the minimum) of its two
children, so the total is the root, a prefix-sum lookup is one walk down and an update
one walk up, each ``log2(capacity)`` levels of numpy operations on a whole batch at once.
"""
from __future__ import annotations

import numpy as np


class SumTree:
    """Priorities of ``capacity`` rows; rows never written have priority 0."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"a sum-tree needs capacity >= 1, got {capacity}")
        self.capacity = capacity
        self.leaves = 1 << max(capacity - 1, 0).bit_length()
        self.sums = np.zeros(2 * self.leaves, np.float64)
        self.mins = np.full(2 * self.leaves, np.inf)

    @property
    def total(self) -> float:
        return float(self.sums[1])

    @property
    def min(self) -> float:
        """The smallest priority written (inf when none is)."""
        return float(self.mins[1])

    def get(self, rows: np.ndarray) -> np.ndarray:
        return self.sums[self.leaves + np.asarray(rows)]

    def update(self, rows: np.ndarray, priorities: np.ndarray) -> None:
        """Set the priorities of ``rows`` (for repeated rows the last value wins)."""
        pos = self.leaves + np.asarray(rows, np.int64)
        self.sums[pos] = priorities
        self.mins[pos] = priorities
        while pos[0] > 1:  # every entry sits on the same level
            pos = pos >> 1
            left = pos << 1
            self.sums[pos] = self.sums[left] + self.sums[left + 1]
            self.mins[pos] = np.minimum(self.mins[left], self.mins[left + 1])

    def find(self, prefix: np.ndarray) -> np.ndarray:
        """For each value ``u`` in ``[0, total)``, the row whose priority interval holds it:
        the smallest ``i`` with ``sum(priorities[:i+1]) > u``."""
        u = np.array(prefix, np.float64)
        node = np.ones(len(u), np.int64)
        while node[0] < self.leaves:
            left = node << 1
            left_sum = self.sums[left]
            right = u >= left_sum
            u -= np.where(right, left_sum, 0.0)
            node = left + right
        return np.minimum(node - self.leaves, self.capacity - 1)
