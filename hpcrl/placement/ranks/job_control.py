"""What every learner rank of a job shares with rank 0: the update's decision and the
checkpoint it writes.

Rank 0 is the job's leader (:class:`~hpcrl.placement.leader.Leader`): it records every
learner's report of an update and decides whether the job goes on, checkpoints or stops
(:class:`JobControl`), and it writes the checkpoint with the states of every collector
(:func:`write_checkpoint`), whichever learner rank or updater it is.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from hpcrl.comm.collectives import bcast_, gather_rows
from hpcrl.exchange.protocol import CONTROL_LAYOUT, Control, Report
from hpcrl.placement.collector_states import StatesJob, collect_states
from hpcrl.placement.leader import Leader

if TYPE_CHECKING:  # annotations only
    import torch


class CheckpointJob(StatesJob, Protocol):
    """What rank 0 reads of its job to write a checkpoint: the collectors' states
    (:class:`~hpcrl.placement.collector_states.StatesJob`) and its spares, which say which
    rank holds each collector place now (None without spares)."""

    spares: Any


class LearnersJob(CheckpointJob, Protocol):
    """What a learner rank that exchanges with the other learners reads of its job: the
    learners' communicator, the gradient workers' ranks, its device, the codec of its
    weights messages, and what rank 0 reads to write a checkpoint
    (:class:`CheckpointJob`); a gradient route and an updater rank read it alike."""

    learners: Any
    device: torch.device

    @property
    def workers(self) -> list[int]:
        """The gradient workers' ranks."""

    @property
    def codec(self) -> Any:
        """How weights messages are packed (``scheme.compress``)."""


def collector_state_for(state: dict[str, Any] | None, offset: int) -> dict | None:
    """This rank's collector state in a checkpoint (by global env offset), if any."""
    if state is None:
        return None
    for entry in state["placement"]["collectors"]:
        if entry["env_offset"] == offset:
            return entry
    return None


class JobControl:
    """The decision of a job's learner ranks (:class:`~hpcrl.learning.loop.UpdateControl`):
    every learner's report gathered on rank 0, whose leader records the update and decides;
    the decision broadcast to every learner rank. It talks over ``learners`` alone (the
    communicator of the updater and gradient workers: the job's ``learners``), nothing
    else of the job."""

    def __init__(self, learners: Any, leader: Leader | None) -> None:
        self.learners, self.leader = learners, leader

    def decide(self, report: Report) -> Control:
        """Gather the reports on rank 0, record them there and share its decision."""
        rows = gather_rows(self.learners, report.data, root=0)
        control = CONTROL_LAYOUT.new()
        if self.leader is not None:
            self.leader.record(rows)
            control = self.leader.control()
        bcast_(self.learners, control.data, root=0)
        return control


def write_checkpoint(job: CheckpointJob, leader: Leader, actor: Any, learner_state: Any,
                     gathered: list[list[dict[str, Any]]], version: int,
                     idle: Callable[[], Any] | None = None) -> None:
    """Rank 0: add the dedicated collectors' states (answers to the weights message of
    ``version``; a lost collector's is not waited for: it resumes afresh) to the gathered
    ones and write; ``idle`` runs while it waits (rank 0's own collectors' weights)."""
    states = [s for part in gathered for s in part]
    pool = job.spares
    states += collect_states(job, version, pool.holder if pool is not None else _itself, idle)
    leader.write_checkpoint(actor, learner_state, states)


def _itself(slot: int) -> int:
    """A collector place held by its first rank (no spares)."""
    return slot
