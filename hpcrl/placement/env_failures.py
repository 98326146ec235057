"""Envs that fail for good: the rank that stepped them tells rank 0, and the job stops in order.

An env that keeps failing past ``env.max_restarts`` (or fails once with restarts off) raises
an :class:`~hpcrl.envs.restarts.EnvFailure` in the rank that steps it. That rank does not
die of it, which under MPICH (and any MPI without fault tolerance) would end the whole job
and lose everything learnt since the last checkpoint. Under every MPI alike:

1. the rank sends rank 0 one line naming itself, the env and the env's last error
   (:func:`tell_leader`), and marks the batch it was filling as failed (its learner takes
   it as it takes any batch, and trains on none of it);
2. its learner ends the update without training, counting the failure in its report
   (``env_failures``); every learner of the job skips the update with it;
3. rank 0 takes the lines (:func:`take_notes`), says them, checkpoints with every state but
   the failed envs' (their place starts afresh from its seed on resume) and stops the job
   with :data:`~hpcrl.runtime.signals.EXIT_ENV_FAILED`, the ``ENV_FAILED`` command bit
   telling every rank to leave with that status.
"""
from __future__ import annotations

import socket
import time
from typing import TYPE_CHECKING, Any, Protocol

from hpcrl.envs.restarts import EnvFailure
from hpcrl.exchange.protocol import TAG_ENV_FAILED
from hpcrl.scheme import RankRole

if TYPE_CHECKING:  # annotations only
    from hpcrl.comm.channel import Channel

# how long rank 0 waits for a line a learner counted (it was sent before the failed batch
# that the learner took, so it is on its way: this only bounds a wait that cannot happen)
NOTE_WAIT_S = 30.0


class FailingRank(Protocol):
    """What a rank whose env failed for good reads of its job to tell rank 0: its world (one
    process or several), its role and the role in words, and its channel."""

    world: Any
    role: RankRole

    @property
    def channel(self) -> Channel:
        """The channel the line goes to rank 0 through."""

    def describe(self) -> str:
        """This rank's role in words."""


def failure_line(job: FailingRank, err: EnvFailure) -> str:
    """The line rank 0 says: this rank, its role and host (a job of ranks), and the env's
    failure."""
    if job.world.Get_size() == 1:
        return str(err)
    return f"rank {job.role.rank} ({job.describe()} on {socket.gethostname()}): {err}"


def tell_leader(job: FailingRank, err: EnvFailure) -> Any:
    """Send rank 0 the line of ``err`` (rank 0 and one process send it to themselves);
    returns the send's request, to be completed before the rank leaves."""
    return job.channel.isend_object(failure_line(job, err), 0, TAG_ENV_FAILED)


def mark_failed(buffer: Any) -> Any:
    """Mark ``buffer`` (a rollout or a chunk) as the batch an env's failure cut short: its
    learner trains on none of it. Returns it."""
    buffer.facts.set(env_failed=1.0)
    return buffer


def is_failed(buffer: Any) -> bool:
    """Whether ``buffer`` was marked by :func:`mark_failed`."""
    return bool(buffer.facts.env_failed)


def failed_state(role: RankRole) -> dict[str, Any]:
    """What the place of ``role`` (a rank whose env failed for good) answers a checkpoint
    with, instead of its state: nothing to save (its envs start afresh from their seeds on
    resume), and the rank whose line rank 0 must have taken before it writes
    (:class:`FailureNotes`)."""
    return {"env_offset": role.env_offset, "env_failed": True, "rank": role.rank}


class FailureNotes:
    """Rank 0's lines of the envs that failed for good, by the rank that sent each: taken
    as the learners count them, and before a checkpoint for every place that answered with
    :func:`failed_state` (so no line is left unreceived when MPI finalises)."""

    def __init__(self, channel: Any) -> None:
        self.channel = channel
        self.lines: dict[int, str] = {}

    def take(self, count: int) -> list[str]:
        """The new lines of the ``count`` failures the learners counted in an update, and
        any other that arrived by then (two collectors may fail in one update)."""
        new: list[str] = []
        deadline = time.monotonic() + NOTE_WAIT_S
        while True:
            envelope = self.channel.probe(tag=TAG_ENV_FAILED)
            if envelope is not None:
                new.append(self._receive(envelope.source))
                continue
            if len(new) >= count or time.monotonic() > deadline:
                return new
            time.sleep(1e-3)

    def take_from(self, ranks: list[int]) -> list[str]:
        """The lines of ``ranks`` not taken yet (each was sent before its rank's failed
        state, so it is on its way)."""
        return [self._receive(rank) for rank in ranks if rank not in self.lines]

    def _receive(self, source: int) -> str:
        line = str(self.channel.recv_object(source, TAG_ENV_FAILED))
        self.lines[source] = line
        return line
