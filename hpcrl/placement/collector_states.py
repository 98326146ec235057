"""Rank 0's side of a checkpoint: every collector rank's state, by the place it holds.

A collector rank answers a weights message carrying ``CHECKPOINT`` with its state (pickled,
``TAG_STATE``), which names its env offset and the version of the message that asked for it
(``asked_by``). :func:`collect_states` waits for one state per collector place of the rank
table, from whichever rank holds that place now (its first holder, or a spare that took it
over: :mod:`hpcrl.placement.mpi.spares`), taking a state only when it answers this
checkpoint's message: a spare that joined after an earlier checkpoint was asked for may
answer that one late, and its state is dropped. A place whose holder is lost is not waited
for (the resumed job starts it afresh); a holder that keeps rank 0 waiting past
``scheme.collector_timeout_s`` is lost too.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from hpcrl.comm.faults import LOST
from hpcrl.exchange.lost_collectors import CollectorWatch, WatchingJob
from hpcrl.exchange.protocol import TAG_STATE
from hpcrl.scheme import COLLECTOR, RankRole


class StatesJob(WatchingJob, Protocol):
    """What rank 0 reads of its job to gather the collectors' states: the rank table (the
    collector places), and what its watch of them reads (:class:`WatchingJob`)."""

    table: list[RankRole]


def collect_states(job: StatesJob, version: int,
                   holder: Callable[[int], int] = lambda slot: slot,
                   idle: Callable[[], Any] | None = None) -> list[dict[str, Any]]:
    """The states of every collector place of ``job`` for the checkpoint asked for with
    weights ``version``; ``holder(slot)``: the rank that holds place ``slot`` now (asked
    again while waiting); ``idle()`` is called between polls (a learner delivering weights
    to a spare that just joined, say)."""
    channel = job.channel
    places = [r for r in job.table if r.role == COLLECTOR]
    watch = CollectorWatch(job, [holder(r.rank) for r in places])
    got: dict[int, dict[str, Any]] = {}

    def missing() -> list[int]:
        """The holders of the places whose state has not come, that are not lost."""
        ranks = [holder(r.rank) for r in places if r.env_offset not in got]
        return [rank for rank in ranks if rank not in LOST]

    while True:
        waiting = missing()
        if not waiting:
            return list(got.values())
        for rank in waiting:
            if rank not in watch.ranks:  # a spare took a place meanwhile
                watch.ranks.append(rank)
            watch.waiting(rank, "state")
        envelope = channel.probe(tag=TAG_STATE)
        if envelope is not None:
            state = channel.recv_object(envelope.source, TAG_STATE)
            if int(state.get("asked_by", version)) == version:
                got[int(state["env_offset"])] = state
                watch.arrived(envelope.source, "state")
            continue
        watch.check_overdue()
        if idle is not None:
            idle()
        time.sleep(1e-3)
