"""A sum-tree (with a min-tree beside it) over per-row priorities, vectorised in numpy.

Leaves hold the priorities; every inner node holds the sum (and the minimum) of its
children, so the total is the root, a prefix-sum lookup is one walk down and an update one
walk up. Nodes have ``fanout`` children (16 by default) rather than 2: a million rows take
5 levels instead of 20, and each level is a handful of numpy operations on the whole batch,
which is what a lookup costs in Python.
"""
from __future__ import annotations

import numpy as np


class SumTree:
    """Priorities of ``capacity`` rows; rows never written have priority 0."""

    def __init__(self, capacity: int, fanout: int = 16) -> None:
        if capacity < 1 or fanout < 2:
            raise ValueError(f"a sum-tree needs capacity >= 1 and fanout >= 2, got "
                             f"{capacity} and {fanout}")
        self.capacity, self.fanout = capacity, fanout
        depth = 1
        while fanout ** depth < capacity:
            depth += 1
        # level 0 is the root; level ``depth`` holds the (padded) leaves
        self.sums = [np.zeros(fanout ** level, np.float64) for level in range(depth + 1)]
        self.mins = [np.full(fanout ** level, np.inf) for level in range(depth + 1)]
        self._offsets = np.arange(fanout)

    @property
    def total(self) -> float:
        """The sum of all priorities (the root)."""
        return float(self.sums[0][0])

    @property
    def min(self) -> float:
        """The smallest priority written (inf when none is)."""
        return float(self.mins[0][0])

    def get(self, rows: np.ndarray) -> np.ndarray:
        """The priorities of ``rows`` (the leaves)."""
        return self.sums[-1][np.asarray(rows)]

    def update(self, rows: np.ndarray, priorities: np.ndarray) -> None:
        """Set the priorities of ``rows`` (for repeated rows the last value wins)."""
        nodes = np.asarray(rows, np.int64)
        self.sums[-1][nodes] = priorities
        self.mins[-1][nodes] = priorities
        k = self.fanout
        for level in range(len(self.sums) - 2, -1, -1):
            nodes = nodes // k
            self.sums[level][nodes] = self.sums[level + 1].reshape(-1, k)[nodes].sum(axis=1)
            self.mins[level][nodes] = self.mins[level + 1].reshape(-1, k)[nodes].min(axis=1)

    def find(self, prefix: np.ndarray) -> np.ndarray:
        """For each value ``u`` in ``[0, total)``, the row whose priority interval holds it:
        the smallest ``i`` with ``sum(priorities[:i+1]) > u``."""
        u = np.array(prefix, np.float64)
        k = self.fanout
        node = np.zeros(len(u), np.int64)
        for level in range(1, len(self.sums)):
            children = self.sums[level][node[:, None] * k + self._offsets]
            cumulative = np.cumsum(children, axis=1)
            pick = np.minimum((u[:, None] >= cumulative).sum(axis=1), k - 1)
            u -= cumulative[np.arange(len(u)), pick] - children[np.arange(len(u)), pick]
            node = node * k + pick
        return np.minimum(node, self.capacity - 1)
