"""A learner's side of collectors that come back: a spare rank takes a lost one's place.

Rank 0 decides (:class:`~hpcrl.placement.mpi.spares.SparePool`) and tells the lost
collector's learner, with ``TAG_REPLACED``, which spare now holds its place (or that none
does). :class:`Takeovers` takes those notices where the learner waits anyway and re-targets
the lost collector's slot: its standing receive now listens to the spare
(:meth:`CollectorInbox.replace <hpcrl.exchange.inbox.CollectorInbox.replace>`), the
newest weights go to it at once (:meth:`LatestWeights.replace
<hpcrl.exchange.latest_weights.LatestWeights.replace>`), and every list of the
learner's collector ranks names it. The slot keeps its index, so the spare fills the batch
where the lost collector did, with its envs (same global indices, fresh seeds).

A learner that lost collectors waits for rank 0's word on them (at most
:data:`DECISION_WAIT_S`) before it counts itself starved: a spare may be on its way.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from hpcrl.comm.faults import LOST
from hpcrl.exchange.protocol import TAG_REPLACED
from hpcrl.scheme import spare_ranks

if TYPE_CHECKING:  # annotations only
    from hpcrl.comm.channel import Channel
    from hpcrl.sections.schema import SchemeConfig

DECISION_WAIT_S = 10.0  # how long a learner waits for rank 0's word on a lost collector


class TakeoverJob(Protocol):
    """What a learner's takeovers read of its rank's job: whether it survives a lost rank
    and has spares (the ``scheme`` section), the channel rank 0's notices come through, and
    the words of the lines it says (the unit its collectors send)."""

    survives: bool

    @property
    def channel(self) -> Channel:
        """The channel rank 0's notices come through."""

    @property
    def scheme(self) -> SchemeConfig:
        """The ``scheme`` section (``max_collector_restarts``)."""

    @property
    def collection_unit(self) -> str:
        """What one collection of a collector is, in words ("rollout", "chunk")."""

    def say(self, line: str) -> None:
        """A line on this rank's standard error."""


class Takeovers:
    """The learner's notices of spares that took its lost collectors' places.

    ``inbox`` (a :class:`~hpcrl.exchange.inbox.CollectorInbox`) and ``sync`` (a
    :class:`~hpcrl.exchange.latest_weights.LatestWeights`) are re-targeted; ``lists``
    are the learner's own lists of its collector ranks, updated in place; ``busy(i)``: slot
    ``i``'s last message is still being read (its notice waits until it is not)."""

    def __init__(self, job: TakeoverJob, inbox: Any, sync: Any, lists: list[list[int]],
                 busy: Callable[[int], bool] = lambda i: False) -> None:
        self.job, self.inbox, self.sync, self.lists, self.busy = job, inbox, sync, lists, busy
        self.active = bool(job.survives) and spare_ranks(job.scheme) > 0
        self.pending: list[tuple[int, int, float]] = []  # (lost rank, spare, loss seen at)
        self.decided: set[int] = set()  # lost ranks rank 0 gave its word on
        self.noticed: dict[int, float] = {}  # lost rank -> when this learner saw it lost
        self.joined: dict[int, tuple[int, float]] = {}  # spare -> (lost rank, loss seen at)

    def poll(self) -> None:
        """Take every notice rank 0 sent."""
        channel = self.job.channel
        while channel.probe(0, TAG_REPLACED) is not None:
            lost, spare, seen = channel.recv_object(0, TAG_REPLACED)
            self.decided.add(lost)
            if spare >= 0:
                self.pending.append((lost, spare, seen))

    def apply(self) -> bool:
        """Re-target the slot of every lost collector a spare took over (those not busy);
        True when one was."""
        if not self.active:
            return False
        self.poll()
        done, waiting = False, []
        for lost, spare, seen in self.pending:
            if lost not in self.inbox.ranks:
                continue
            i = self.inbox.ranks.index(lost)
            if self.busy(i):
                waiting.append((lost, spare, seen))
                continue
            self.inbox.replace(i, spare)
            self.sync.replace(lost, spare)
            for ranks in self.lists:
                if ranks is not self.inbox.ranks and ranks[i] == lost:
                    ranks[i] = spare
            self.joined[spare] = (lost, seen)
            done = True
        self.pending = waiting
        self._say_first_messages()
        return done

    def _say_first_messages(self) -> None:
        """A line for each spare whose first message arrived: how long its place was empty."""
        for spare, (lost, seen) in list(self.joined.items()):
            i = self.inbox.ranks.index(spare) if spare in self.inbox.ranks else -1
            if i < 0 or self.inbox.received[i] < 1:
                continue
            del self.joined[spare]
            taken = self.inbox.first_taken.get(i, time.time())
            self.job.say(f"hpcrl: rank {spare} (spare) holds the place of rank {lost}: its "
                         f"first {self.job.collection_unit} was taken "
                         f"{taken - seen:.1f} s after rank 0 learnt of the loss")

    def awaiting(self) -> bool:
        """Whether a lost collector of this learner may still be replaced: rank 0 has not
        given its word on it (for less than :data:`DECISION_WAIT_S` since this learner saw
        it lost), or a spare's notice waits to be applied."""
        if not self.active:
            return False
        self.poll()
        now = time.monotonic()
        for rank in self.inbox.ranks:
            if rank in LOST and rank not in self.decided:
                if now - self.noticed.setdefault(rank, now) < DECISION_WAIT_S:
                    return True
        return bool(self.pending)

    def wait(self) -> None:
        """Wait a little for rank 0's word (between the polls of a starving learner)."""
        time.sleep(0.01)
        self.apply()
