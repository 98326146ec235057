"""A learner's view of its collector ranks: which are live, and which it waits for too long.

Every exchange a learner has with its collectors (their rollouts or transition chunks, the
weights it sends them, their checkpoint states, their final counts) asks this one object
two things: has this collector been lost, and is the request to it done. A collector is lost
when MPI says it is dead (an ``ERR_PROC_FAILED`` from one of its requests, or the job's
:class:`~hpcrl.comm.faults.FailureWatch`), or when the learner has waited for its next
message longer than ``scheme.collector_timeout_s``.

Where the MPI survives a lost rank (the job's ``survives``), the learner drops what the
lost collector had in flight and goes on with the others; a hung one is killed first when
it shares the learner's node, so that MPI counts it dead and the job's end does not wait for
it. Elsewhere a lost collector ends the job at once, its rank, role and host named: a hung
collector no longer keeps a job waiting until its time limit.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Protocol

from hpcrl.comm import poll_until
from hpcrl.comm.faults import DEAD, LOST, PeerInfo, is_peer_failure, stop_hung_rank
from hpcrl.errors import ExplainedError

if TYPE_CHECKING:  # annotations only
    from hpcrl.comm.channel import Channel
    from hpcrl.sections.schema import SchemeConfig


class WatchingJob(Protocol):
    """What a learner's watch of its collectors reads of its rank's job: the channel its
    requests go through, the ``scheme`` section (``collector_timeout_s``), whether the job
    survives a lost rank and every rank's host and pid (to name and stop a hung one), the
    roles in words and a line to say. Declared here, where it is used, so that the watch
    depends on these parts alone and not on the placement that assembles the job."""

    survives: bool
    peers: list[PeerInfo] | None

    @property
    def channel(self) -> Channel:
        """The channel of this rank's requests to and from its collectors."""

    @property
    def scheme(self) -> SchemeConfig:
        """The ``scheme`` section (``collector_timeout_s``)."""

    def describe_rank(self, rank: int) -> str:
        """Rank ``rank``'s role in words."""

    def say(self, line: str) -> None:
        """A line on this rank's standard error."""


class LostCollectorError(ExplainedError):
    """A collector was lost where the job cannot go on without it."""


class CollectorWatch:
    """Liveness and overdue timers of one learner's collectors (``ranks``: world ranks)."""

    def __init__(self, job: WatchingJob, ranks: list[int]) -> None:
        self.job, self.ranks = job, list(ranks)
        self.channel = job.channel
        self.timeout = float(job.scheme.collector_timeout_s)
        # (rank, what) -> when the learner began waiting for it: its next rollout
        # ("stream"), its taking of a weights message, its checkpoint state, its final count
        self.since: dict[tuple[int, str], float] = {}

    @property
    def survives(self) -> bool:
        """Whether the job goes on without a lost collector."""
        return bool(self.job.survives)

    def replace(self, old: int, new: int) -> None:
        """Rank ``new`` (a spare) took the place of the lost collector ``old``: watched from
        now on in its stead."""
        self.ranks[self.ranks.index(old)] = new
        for key in [k for k in self.since if k[0] == old]:
            del self.since[key]

    def is_lost(self, rank: int) -> bool:
        """Whether ``rank`` was given up on (here or by the job's failure watch)."""
        return rank in LOST

    @property
    def live(self) -> list[int]:
        """The collectors not lost, in rank order."""
        return [r for r in self.ranks if r not in LOST]

    def lose(self, rank: int, why: str = "is dead (MPI: process failure)",
             hung: bool = False) -> None:
        """Give ``rank`` up: where the job survives, record it (killing it first when it is
        ``hung`` on this node: rank 0's failure watch names the dead, this learner the
        hung); elsewhere end the job with ``why``."""
        if rank in LOST:
            return
        where = self.job.peers[rank].host if self.job.peers else "?"
        line = f"rank {rank} ({self.job.describe_rank(rank)}) on {where} {why}"
        if not self.survives:
            raise LostCollectorError(
                f"{line}; this MPI cannot go on without it, so the job ends (resume it from "
                f"its last checkpoint; docs/reliability.md: Lost collectors)")
        if hung and self.job.peers is not None:
            killed = stop_hung_rank(self.job.peers[rank])
            line += ("; killed (SIGKILL) so that MPI counts it dead" if killed else
                     "; it runs on another node, so the job's end may wait for it")
        if LOST.mark(rank, why if hung else DEAD) and hung:
            self.job.say(f"hpcrl: {line}; going on with "
                         f"{len(self.live)} of this learner's {len(self.ranks)} collectors")

    # -- requests ----------------------------------------------------------------------
    def done(self, rank: int, request: Any) -> bool:
        """One test of ``request`` (to or from ``rank``); a dead peer is lost, and its
        request counts as not done."""
        if rank in LOST:
            return False
        try:
            return self.channel.test(request)
        except Exception as exc:
            if not is_peer_failure(exc):
                raise
            self.lose(rank)
            return False

    def wait(self, rank: int, request: Any, what: str = "weights") -> bool:
        """Wait for ``request`` with ``rank`` (polling, bounded by the timeout); False when
        ``rank`` was lost meanwhile."""
        self.waiting(rank, what)

        def outcome() -> bool | None:  # True: taken; False: lost meanwhile; None: waiting
            if self.done(rank, request):
                return True
            return False if rank in LOST or self.overdue(rank, what) else None

        taken = poll_until(outcome, what=f"rank {rank}'s {what}")
        if taken:
            self.arrived(rank, what)
        return taken

    # -- overdue timers ------------------------------------------------------------------
    def waiting(self, rank: int, what: str = "stream") -> None:
        """The learner now waits for ``what`` of ``rank`` (unless it already did)."""
        self.since.setdefault((rank, what), time.monotonic())

    def arrived(self, rank: int, what: str = "stream") -> None:
        """``what`` of ``rank`` came: its timer stops."""
        self.since.pop((rank, what), None)

    def overdue(self, rank: int, what: str = "stream") -> bool:
        """Whether ``rank`` kept the learner waiting for ``what`` past the timeout (it is
        then lost)."""
        started = self.since.get((rank, what))
        if self.timeout <= 0 or started is None or rank in LOST:
            return rank in LOST
        waited = time.monotonic() - started
        if waited < self.timeout:
            return False
        self.lose(rank, f"sent nothing for {waited:.0f} s (scheme.collector_timeout_s="
                        f"{self.timeout:g}): hung, stopped or cut off", hung=True)
        return True

    def check_overdue(self) -> None:
        """Lose every collector waited for past the timeout."""
        for rank, what in list(self.since):
            self.overdue(rank, what)

