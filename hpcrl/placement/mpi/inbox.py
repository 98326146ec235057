"""Standing receives for what asynchronous collector ranks stream to their learner.

Each collector streams step buffers (rollouts, or chunks of transitions) through a
:class:`~hpcrl.placement.mpi.streams.StreamIn`: shared memory within a node, messages across.
:class:`CollectorInbox` keeps one standing receive per collector, counts what arrived, and
at the end drains every message still in flight until the collector's FINAL count. A
learner may leave a collector's receive unposted for a while to hold it back (its sends are
synchronous then).
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from hpcrl.comm import irecv, wait_any
from hpcrl.placement.mpi.protocol import TAG_FINAL
from hpcrl.placement.mpi.streams import StreamIn


class CollectorInbox:
    """One stream and one standing receive per collector rank (``layout``: of its buffers)."""

    def __init__(self, job: Any, ranks: list[int], layout: Any) -> None:
        self.world, self.ranks = job.world, list(ranks)
        self.streams = [StreamIn(job, rank, layout) for rank in self.ranks]
        self.heads: list[Any] = [None] * len(self.ranks)  # each posted receive's header
        self.posted = [False] * len(self.ranks)
        self.received = [0] * len(self.ranks)
        for i in range(len(self.ranks)):
            self.post(i)

    @property
    def buffers(self) -> list[Any]:
        """Each collector's buffer: the message that arrived last (once it did)."""
        return [stream.buffer for stream in self.streams]

    def post(self, i: int) -> None:
        """Receive collector ``i``'s next message (its last one is no longer read)."""
        self.heads[i] = self.streams[i].post()
        self.posted[i] = True

    def _take(self, i: int) -> None:
        self.streams[i].take()
        self.posted[i] = False
        self.received[i] += 1

    def arrived(self, i: int) -> bool:
        """Whether collector ``i``'s message is in its buffer now; call :meth:`post` once
        the buffer was used."""
        if not self.posted[i] or not self.heads[i].Test():
            return False
        self._take(i)
        return True

    def next(self, idle: Callable[[], Any] | None = None) -> int:
        """Wait for a message from any collector (all posted); returns its index."""
        i, _ = wait_any(self.heads, idle=idle)
        self._take(i)
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
            self.streams[i].cancel()
            self.posted[i] = False
