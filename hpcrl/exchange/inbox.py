"""Standing receives for what asynchronous collector ranks stream to their learner.

Each collector streams step buffers (rollouts, or chunks of transitions) through a
:class:`~hpcrl.exchange.streams.StreamIn`: shared memory within a node, messages across.
:class:`CollectorInbox` keeps one standing receive per collector, counts what arrived, and
at the end drains every message still in flight until the collector's FINAL count. A
learner may leave a collector's receive unposted for a while to hold it back (its sends are
synchronous then).
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from hpcrl.comm import poll_until
from hpcrl.comm.faults import is_peer_failure
from hpcrl.exchange.lost_collectors import CollectorWatch, WatchingJob
from hpcrl.exchange.node_transport import ExchangeJob, stream_in
from hpcrl.exchange.protocol import TAG_FINAL


class InboxJob(ExchangeJob, WatchingJob, Protocol):
    """What a learner's inbox reads of its rank's job: what its streams in read
    (:class:`~hpcrl.exchange.node_transport.ExchangeJob`) and what its watch of the
    collectors reads (:class:`~hpcrl.exchange.lost_collectors.WatchingJob`)."""


class CollectorInbox:
    """One stream and one standing receive per collector rank (``layout``: of its buffers).

    ``watch`` (the learner's :class:`~hpcrl.exchange.lost_collectors.CollectorWatch`)
    says which collectors are lost: their receives are never posted or waited for again,
    what they had in flight is dropped, and a collector that keeps the learner waiting past
    ``scheme.collector_timeout_s`` is lost too.
    """

    local_seconds = 0.0  # chunks come over the transport: none is collected here

    def __init__(self, job: InboxJob, ranks: list[int], layout: Any,
                 watch: CollectorWatch | None = None) -> None:
        self.channel, self.ranks = job.channel, list(ranks)
        self.job, self.layout = job, layout
        self.watch = watch if watch is not None else CollectorWatch(job, self.ranks)
        self.streams = [stream_in(job, rank, layout) for rank in self.ranks]
        self.heads: list[Any] = [None] * len(self.ranks)  # each posted receive's header
        self.posted = [False] * len(self.ranks)
        self.received = [0] * len(self.ranks)
        self.first_taken: dict[int, float] = {}  # slot -> when its first message was taken
        for i in range(len(self.ranks)):
            self.post(i)

    @property
    def buffers(self) -> list[Any]:
        """Each collector's buffer: the message that arrived last (once it did)."""
        return [stream.buffer for stream in self.streams]

    def lost(self, i: int) -> bool:
        """Whether collector ``i`` was lost (its messages are no longer taken)."""
        return self.watch.is_lost(self.ranks[i])

    @property
    def live(self) -> int:
        """How many of the collectors are live."""
        return len(self.watch.live)

    def post(self, i: int) -> None:
        """Receive collector ``i``'s next message (its last one is no longer read); the
        learner waits for it from now on (a lost collector's is never posted)."""
        if self.lost(i):
            self.posted[i] = False
            return
        self.heads[i] = self.streams[i].post()
        self.posted[i] = True
        self.watch.waiting(self.ranks[i])

    def replace(self, i: int, rank: int) -> None:
        """Rank ``rank`` (a spare) took the place of collector ``i`` (lost): its stream from
        now on, its first message received into a buffer of its own."""
        self.watch.replace(self.ranks[i], rank)
        self.ranks[i] = rank
        self.streams[i] = stream_in(self.job, rank, self.layout)
        self.heads[i], self.posted[i], self.received[i] = None, False, 0
        self.post(i)

    def _take(self, i: int) -> bool:
        rank = self.ranks[i]
        try:
            self.streams[i].take()
        except Exception as exc:  # its data part, from a collector that died meanwhile
            if not is_peer_failure(exc):
                raise
            self.watch.lose(rank)
            self.posted[i] = False
            return False
        self.posted[i] = False
        self.received[i] += 1
        if self.received[i] == 1:
            self.first_taken[i] = time.time()  # (a spare's first, how long a place was empty)
        self.watch.arrived(rank)
        return True

    def arrived(self, i: int) -> bool:
        """Whether collector ``i``'s message is in its buffer now; call :meth:`post` once
        the buffer was used. A collector waited for past the timeout is lost here."""
        if not self.posted[i] or self.lost(i):
            return False
        if not self.watch.done(self.ranks[i], self.heads[i]):
            self.watch.overdue(self.ranks[i])
            return False
        return self._take(i)

    def next(self, idle: Callable[[], Any] | None = None) -> int | None:
        """Wait for a message from any live collector whose receive is posted; returns its
        index, or None once none is (no collector is live, or the caller holds the last
        message of every live one: nothing can arrive before it posts again)."""
        def first() -> int | None:  # -1: nothing can arrive
            found = next((i for i in range(len(self.ranks)) if self.arrived(i)), None)
            if found is None and not any(self.posted[i] and not self.lost(i)
                                         for i in range(len(self.ranks))):
                return -1
            return found

        found = poll_until(first, what="a collector's message", idle=idle)
        return None if found < 0 else found

    def drain(self) -> None:
        """After STOP: drop every message until each live collector's FINAL count arrived,
        then withdraw the standing receives."""
        for i, rank in enumerate(self.ranks):
            if self.lost(i):
                continue
            final = np.zeros(1, np.int64)
            request = self.channel.irecv(final, rank, TAG_FINAL)
            counted = False  # the count came: then wait for the messages it counts
            if not self.posted[i]:
                self.post(i)
            while not self.lost(i):
                if self.arrived(i):
                    self.post(i)
                    continue
                self.watch.waiting(rank, "final")
                if counted or self.watch.done(rank, request) \
                        or self.watch.overdue(rank, "final"):
                    counted = True
                    self.watch.arrived(rank, "final")
                    if self.lost(i) or self.received[i] >= int(final[0]):
                        break
                time.sleep(1e-3)
            if self.lost(i):
                continue  # its requests are left to MPI: the peer is gone
            self.streams[i].cancel()
            self.posted[i] = False
