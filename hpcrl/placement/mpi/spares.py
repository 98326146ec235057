"""Collector ranks that come back: spare ranks, started with the job, take lost ones' places.

Under Open MPI's ULFM an asynchronous job goes on without a lost collector rank; with
``scheme.max_collector_restarts = N`` it starts N spare ranks too (after the collectors in
the rank table), idle until one is needed. When rank 0's failure watch sees a collector die
(its own death, a crash, a kill, or a hung one its learner killed), :class:`SparePool` picks
an idle spare, tells it whose place it takes (``TAG_ASSIGN``: the lost rank's slot in the
rank table and how many ranks held it before), and tells the slot's learner which rank holds
it now (``TAG_REPLACED``, taken by :class:`~hpcrl.placement.takeovers.Takeovers`). The
spare (:class:`SpareRank`) builds the lost rank's envs from fresh seeds (its incarnation
sets them apart from every earlier holder's), waits for its learner's newest weights, and
collects as that collector did: same envs, same slot in the learner's inbox, same place in
the checkpoint (states are kept by env offset).

Why spares rather than ``MPI_Comm_spawn``: measured here (``benchmarks/
collector_replacement.py``, Open MPI 5.0.11 with ULFM, 2-core AMD EPYC), a spare collects
its first rollout 0.14 s after it is told, a spawned process 10.9 s after the spawn (it
starts Python, imports torch and hpcrl, connects, then does the same); and a spawned
process is outside the job's communicator, so every learner, not only rank 0, would have to
join a collective rebuild of the world (shrink, spawn, merge, split) and re-post all it has
in flight. A batch job's allocation must hold the slot a replacement runs in either way: a
spare holds it from the start.
"""
from __future__ import annotations

import dataclasses
import threading
import time
from typing import TYPE_CHECKING, Any, Protocol

from hpcrl.comm.faults import LOST
from hpcrl.exchange.protocol import TAG_ASSIGN, TAG_REPLACED, TAG_WEIGHTS
from hpcrl.placement.ranks.collector_rank import CollectorJob, CollectorRank
from hpcrl.scheme import COLLECTOR, SPARE, RankRole

if TYPE_CHECKING:  # annotations only
    from hpcrl.comm.channel import Channel


class PoolJob(Protocol):
    """What rank 0's pool of spares reads of its job: the world (its orders go out on it),
    the rank table (the spares and collector places), the gradient workers (the learner
    of each place) and the ranks' roles in words."""

    world: Any
    table: list[RankRole]

    @property
    def workers(self) -> list[int]:
        """The gradient workers' ranks, by group."""

    def describe_rank(self, rank: int) -> str:
        """Rank ``rank``'s role in words."""


class SpareJob(Protocol):
    """What a spare rank reads of its job: the channel rank 0's orders come through, the
    rank table and its own rank, and the job as a collector rank in a lost place's role
    (what its :class:`~hpcrl.placement.ranks.collector_rank.CollectorRank` reads)."""

    table: list[RankRole]

    @property
    def channel(self) -> Channel:
        """The channel of rank 0's orders."""

    @property
    def rank(self) -> int:
        """This rank in the world."""

    def in_role(self, role: RankRole) -> CollectorJob:
        """This rank's job with ``role`` (a lost collector's place) as its role."""

IDLE_POLL_S = 0.05  # how often an idle spare looks for its orders


class SparePool:
    """Rank 0's spares and which rank holds each collector's place (``job``: rank 0's)."""

    def __init__(self, job: PoolJob) -> None:
        self.job = job
        self.idle = [r.rank for r in job.table if r.role == SPARE]
        self.size = len(self.idle)
        self.holders = {r.rank: r.rank for r in job.table if r.role == COLLECTOR}
        self.slot_of = {rank: rank for rank in self.holders}  # holder -> its slot
        self.incarnation = dict.fromkeys(self.holders, 0)
        self.unreplaced: set[int] = set()  # slots lost for good (no spare was left)
        self.closing = False
        self.lock = threading.Lock()
        self.sends: list[Any] = []

    @property
    def spare_ranks(self) -> list[int]:
        """Every spare rank of the job."""
        return [r.rank for r in self.job.table if r.role == SPARE]

    def holder(self, slot: int) -> int:
        """The rank that holds collector ``slot``'s place now."""
        with self.lock:
            return self.holders[slot]

    def holder_map(self) -> dict[int, int]:
        """Every collector slot's current holder."""
        with self.lock:
            return dict(self.holders)

    def standing(self) -> int:
        """Collector places held, or being taken, by a live rank: the job's full count less
        the places lost with no spare left."""
        with self.lock:
            return len(self.holders) - len(self.unreplaced)

    def on_lost(self, rank: int) -> str | None:
        """``rank`` died (rank 0's failure watch, any thread): an idle spare leaves the pool;
        a collector's place goes to an idle spare, or, with none left, stays empty. Its
        learner is told either way; returns what became of the place (None: nothing)."""
        with self.lock:
            if self.closing:
                return None
            if rank in self.idle:
                self.idle.remove(rank)
                return "a spare less"
            slot = self.slot_of.get(rank)
            if slot is None or self.holders[slot] != rank:
                return None
            learner = self.job.workers[self.job.table[slot].group]
            seen = time.time()
            if not self.idle:
                self.unreplaced.add(slot)
                self._send((rank, -1, seen), learner, TAG_REPLACED)
                return (f"no spare rank is left to take its place (scheme."
                        f"max_collector_restarts={self.size}); the job goes on without it")
            spare = self.idle.pop(0)
            self.incarnation[slot] += 1
            self.holders[slot], self.slot_of[spare] = spare, slot
            self._send({"slot": slot, "incarnation": self.incarnation[slot]}, spare,
                       TAG_ASSIGN)
            self._send((rank, spare, seen), learner, TAG_REPLACED)
            left = len(self.idle)
            return (f"rank {spare} (spare) takes its place (the envs from "
                    f"{self.job.table[slot].env_offset} of {self.job.describe_rank(slot)}); "
                    f"{left} spare rank{'s' if left != 1 else ''} left")

    def _send(self, message: Any, dest: int, tag: int) -> None:
        """Start sending ``message`` (kept until it completes: sent from any thread)."""
        self.sends = [r for r in self.sends if not r.Test()]
        self.sends.append(self.job.world.isend(message, dest=dest, tag=tag))

    def release(self) -> None:
        """The job ends: no more replacements, and every spare not lost is told to leave (a
        spare that took a place leaves with its collector's STOP and ignores it)."""
        with self.lock:
            self.closing = True
            for rank in self.spare_ranks:
                if rank not in LOST:
                    self._send(None, rank, TAG_ASSIGN)


class SpareRank:
    """A spare rank's role: wait for rank 0's orders; take a lost collector's place, or
    leave when the job ends."""

    def __init__(self, job: SpareJob) -> None:
        self.job = job
        self.preempted = False
        self.env_failed = False

    def run(self) -> None:
        """Idle until told; then collect in the lost collector's place until STOP."""
        channel = self.job.channel
        while channel.probe(0, TAG_ASSIGN) is None:
            time.sleep(IDLE_POLL_S)
        order = channel.recv_object(0, TAG_ASSIGN)
        if order is not None:
            self._take_place(int(order["slot"]), int(order["incarnation"]))

    def _take_place(self, slot: int, incarnation: int) -> None:
        """Build collector ``slot``'s envs (incarnation ``incarnation``: fresh seeds), wait
        for its learner's weights (or the job's end) and collect."""
        job = self.job
        role = dataclasses.replace(job.table[slot], rank=job.rank)
        collector = CollectorRank(job.in_role(role), None, incarnation)
        channel, learner = job.channel, collector.worker
        while channel.probe(learner, TAG_WEIGHTS) is None:
            if channel.probe(0, TAG_ASSIGN) is not None \
                    and channel.recv_object(0, TAG_ASSIGN) is None:
                collector.envs.close()  # the job ended before its learner took it in
                return
            time.sleep(IDLE_POLL_S / 10)
        collector.run()
        self.preempted, self.env_failed = collector.preempted, collector.env_failed
