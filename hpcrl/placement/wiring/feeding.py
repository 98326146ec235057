"""What a learner that feeds collector ranks reads of its job, whichever family it learns.

A gradient worker's rollout source and a replay learner both take what their collectors
stream (an inbox and its watch), re-target a lost collector's slot to the spare that takes
its place, tell rank 0 of their own envs' failures, and send weights to their collectors
and inference ranks. :class:`FeedingJob` names those parts once, so that each data path
declares only what it reads on top of them, and no role takes the whole job
(:class:`~hpcrl.placement.job.RankJob`, which satisfies it).
"""
from __future__ import annotations

from typing import Any, Protocol

from hpcrl.exchange.inbox import InboxJob
from hpcrl.placement.env_failures import FailingRank
from hpcrl.placement.takeovers import TakeoverJob
from hpcrl.scheme import COLLECTOR, INFERENCE


class FeedingJob(InboxJob, TakeoverJob, FailingRank, Protocol):
    """What a learner of collector ranks reads of its job: what its inbox, takeovers and
    failed envs read (:class:`~hpcrl.exchange.inbox.InboxJob`,
    :class:`~hpcrl.placement.takeovers.TakeoverJob`,
    :class:`~hpcrl.placement.env_failures.FailingRank`; its collectors and the subscribers
    of its weights come from the rank table and its role's group: :func:`collectors_of`,
    :func:`subscribers_of`), who takes its weights' headers alone, and its own envs where
    it collects itself."""

    @property
    def header_only(self) -> frozenset[int]:
        """The subscribers whose weights messages are headers alone."""

    def collector_envs(self) -> Any:
        """This rank's envs, made by the env layer (one process collecting itself)."""


def collectors_of(job: FeedingJob) -> list[int]:
    """The collector ranks of ``job``'s rank's group (the collectors it learns from), in
    rank order."""
    return [r.rank for r in job.table if r.role == COLLECTOR and r.group == job.role.group]


def subscribers_of(job: FeedingJob) -> list[int]:
    """The ranks a learner's weights go to: the inference ranks of its group first (a
    collector's first request waits for them), then its collectors."""
    inference = [r.rank for r in job.table
                 if r.role == INFERENCE and r.group == job.role.group]
    return inference + collectors_of(job)
