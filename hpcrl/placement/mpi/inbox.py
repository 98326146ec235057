"""Standing receives for what asynchronous collector ranks stream to their learner.

Each collector sends a message as two buffers (header, then data) with ``TAG_ROLLOUT``:
a rollout, or a chunk of transitions. :class:`CollectorInbox` keeps one preallocated buffer
and one pair of posted receives per collector, counts what arrived, and at the end drains
every message still in flight until the collector's FINAL count. A learner may leave a
collector's receive unposted for a while to hold it back (its sends are synchronous then).
"""
from __future__ import annotations

import time
from typing import Any, Callable, Optional

import numpy as np

from hpcrl.comm import irecv, wait, wait_any
from hpcrl.placement.mpi.protocol import TAG_FINAL, TAG_ROLLOUT


class CollectorInbox:
    """One buffer and one standing receive per collector rank."""

    def __init__(self, world: Any, ranks: list[int], new_buffer: Callable[[], Any]) -> None:
        self.world, self.ranks = world, list(ranks)
        self.buffers = [new_buffer() for _ in self.ranks]
        self.heads: list[Any] = [None] * len(self.ranks)
        self.bodies: list[Any] = [None] * len(self.ranks)
        self.posted = [False] * len(self.ranks)
        self.received = [0] * len(self.ranks)
        for i in range(len(self.ranks)):
            self.post(i)

    def post(self, i: int) -> None:
        """Receive collector ``i``'s next message into its buffer (the buffer is free)."""
        rank, buffer = self.ranks[i], self.buffers[i]
        self.heads[i] = irecv(self.world, buffer.header, rank, TAG_ROLLOUT)
        self.bodies[i] = irecv(self.world, buffer.data, rank, TAG_ROLLOUT)
        self.posted[i] = True

    def arrived(self, i: int) -> bool:
        """Whether collector ``i``'s message is in its buffer now; call :meth:`post` once
        the buffer was used."""
        if not self.posted[i] or not self.heads[i].Test():
            return False
        wait(self.bodies[i])
        self.posted[i] = False
        self.received[i] += 1
        return True

    def next(self, idle: Optional[Callable[[], Any]] = None) -> int:
        """Wait for a message from any collector (all posted); returns its index."""
        i, _ = wait_any(self.heads, idle=idle)
        wait(self.bodies[i])
        self.posted[i] = False
        self.received[i] += 1
        return i

    def drain(self) -> None:
        """After STOP: drop every message until each collector's FINAL count arrived, then
        withdraw the standing receives."""
        for i, rank in enumerate(self.ranks):
            final = np.zeros(1, np.int64)
            request = irecv(self.world, final, rank, TAG_FINAL)
            if not self.posted[i]:
                self.post(i)
            while True:
                if self.arrived(i):
                    self.post(i)
                    continue
                if request.Test() and self.received[i] >= int(final[0]):
                    break
                time.sleep(1e-3)
            for pending in (self.heads[i], self.bodies[i]):
                pending.Cancel()
                pending.Wait()
            self.posted[i] = False
