"""The chunk stream in one process: the replay learner's own collector, stepped on demand.

A replay learner takes transition chunks from a :class:`~hpcrl.learning.replay_loop.ChunkSource`:
its collector ranks' streams in a job (:class:`~hpcrl.exchange.inbox.CollectorInbox`),
or, where it collects itself (one process), :class:`ChunksInProcess`: when the loop asks
whether a chunk arrived, the collector collects it then. Its weights sync is
:class:`~hpcrl.exchange.weights.SharedInPlace` where the collector acts with the learner's
very policy (on the CPU: a new version copies nothing), else
:class:`~hpcrl.exchange.weights.CopyInProcess`.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from hpcrl.buffers.replay.transitions import Transitions
from hpcrl.envs.restarts import EnvFailure


class ChunkCollector(Protocol):
    """What the stream asks of the collector it steps (a
    :class:`~hpcrl.collection.collector.Collector` of transitions): collect into a chunk,
    and its state for a checkpoint and a resume."""

    def collect(self, buffer: Transitions, steps: int, *, job_env_steps: int) -> Any:
        """Fill ``buffer`` with ``steps`` steps of every env."""

    def state_dict(self) -> dict[str, Any]:
        """The collector's state."""

    def load_state_dict(self, state: dict[str, Any]) -> list[str]:
        """Resume from ``state``; the env attributes that could not be restored."""


class ChunksInProcess:
    """A chunk source of one collector in this process: ``steps()`` steps of every env per
    chunk, counted from the job's ``job_env_steps()``."""

    def __init__(self, collector: ChunkCollector, chunk: Transitions,
                 steps: Callable[[], int], job_env_steps: Callable[[], int],
                 on_env_failure: Callable[[EnvFailure, Transitions], None] | None = None
                 ) -> None:
        self.collector, self.chunk = collector, chunk
        self.steps, self.job_env_steps = steps, job_env_steps
        # an env failed for good while collecting: told the chunk it was filling (which it
        # then hands as arrived, marked failed: see hpcrl.placement.env_failures)
        self.on_env_failure = on_env_failure
        self.failed = False
        self.posted = [True]
        self.local_seconds = 0.0  # collecting, inside arrived()

    @property
    def buffers(self) -> list[Any]:
        """The one chunk buffer."""
        return [self.chunk]

    @property
    def live(self) -> int:
        """One collector, always live."""
        return 1

    def arrived(self, i: int) -> bool:
        """Collect the next chunk (unless the loop holds the collector back)."""
        if not self.posted[i]:
            return False
        started = time.perf_counter()
        try:
            self.collector.collect(self.chunk, self.steps(),
                                   job_env_steps=self.job_env_steps())
        except EnvFailure as err:
            if self.on_env_failure is None:
                raise
            self.failed = True
            self.on_env_failure(err, self.chunk)
        self.local_seconds += time.perf_counter() - started
        self.posted[i] = False
        return True

    def post(self, i: int) -> None:
        """Let the collector collect again."""
        self.posted[i] = True

    def drain(self) -> None:
        """Nothing is in flight in one process."""

    def state_dict(self) -> dict[str, Any]:
        """The collector's state, for a checkpoint (taken between updates: nothing of the
        next one has been collected)."""
        return self.collector.state_dict()
