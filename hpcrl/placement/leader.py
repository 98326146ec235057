"""Rank 0's bookkeeping: counters, progress rows, checkpoints, the stop decision, eval.

The leader turns the per-update reports of the gradient workers into one row of
``progress.csv`` and writes checkpoints with the state of every role it collected.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol, TypeVar

from torch import nn

from hpcrl.comm import report_and_abort
from hpcrl.comm.faults import LOST
from hpcrl.errors import ExplainedError
from hpcrl.exchange.protocol import Control, ReportLayout
from hpcrl.learning.eval_curve import EvalCurve
from hpcrl.learning.loop import WriterControl
from hpcrl.learning.run_writer import IntervalHook, RemoteEvaluations, RunWriter
from hpcrl.placement.env_failures import FailureNotes
from hpcrl.placement.evaluators import RemoteEvaluations as Evaluations
from hpcrl.runtime.run_dir import RunDir
from hpcrl.runtime.signals import EXIT_ENV_FAILED
from hpcrl.scheme import EVALUATOR, RankRole

if TYPE_CHECKING:  # annotations only
    from hpcrl.comm.channel import Channel
    from hpcrl.envs.vector import EnvSpaces
    from hpcrl.learning.run_writer import WrittenConfig

Method = TypeVar("Method", bound=Callable[..., Any])


class LeaderJob(Protocol):
    """What rank 0's leader reads of its job: the world (to end it on a failure), the rank
    table and gradient workers (the collectors and learners it counts), whether the job
    survives lost collectors and its spares, the spaces and the recorded parts of the
    config (its writer), the channel the lines of failed envs come through, and a fresh
    acting policy (the CPU copy it checkpoints and evaluates)."""

    world: Any
    table: list[RankRole]
    spares: Any
    survives: bool
    spaces: EnvSpaces

    @property
    def channel(self) -> Channel:
        """The channel the lines of failed envs come through."""

    @property
    def workers(self) -> list[int]:
        """The gradient workers' ranks."""

    def describe(self) -> str:
        """This rank's role in words (for an abort's report)."""

    def say(self, line: str) -> None:
        """A line on this rank's standard error."""

    def written_config(self) -> WrittenConfig:
        """What the writer reads of the config and writes of it."""

    def new_policy(self) -> nn.Module:
        """A fresh acting policy of the job's algorithm, on the CPU."""


def _ends_the_job(method: Method) -> Method:
    """A failure of the leader that explains itself (a run file that cannot be written, a
    checkpoint refused) aborts every rank of a job with its message; left to propagate, the
    CLI would report it on rank 0 alone and the other ranks would wait for rank 0 forever.
    In a job of one process it propagates to the caller."""
    @functools.wraps(method)
    def guarded(self: Leader, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except ExplainedError as err:
            if self.job.world.Get_size() == 1:
                raise
            report_and_abort(self.job.world, self.job.describe, err, err.__traceback__)
    return guarded  # type: ignore[return-value]


class Leader:
    """Counters and records of the job; lives on rank 0 only. What it writes goes through
    the :class:`~hpcrl.learning.run_writer.RunWriter` every placement uses; below
    ``min_collectors`` live collector ranks (``scheme.min_collectors``) it stops the job."""

    @_ends_the_job
    def __init__(self, job: LeaderJob, run: RunDir, stat_names: tuple[str, ...],
                 resume_state: dict[str, Any] | None, console: IO[str] | None,
                 min_collectors: int, interval: IntervalHook | None = None) -> None:
        self.job, self.run, self.min_collectors = job, run, min_collectors
        self.layout = ReportLayout(stat_names)
        self.writer = RunWriter(job.written_config(), job.spaces, run, stat_names,
                                resume_state, console,
                                evaluator_ranks(job, console, lambda: self.writer.command()),
                                interval)
        self.evaluation: dict[str, Any] | None = None  # the final one, once run
        self.live_collectors = self.collector_ranks  # as the last update counted them
        self.failures = FailureNotes(job.channel)  # the lines of envs that failed for good
        # the decision every placement takes (the actor, once set: for train.eval_every)
        self.decision = WriterControl(self.writer, self.layout)

    @property
    def actor(self) -> nn.Module | None:
        """This rank's policy, which the evaluations during training copy."""
        return self.decision.actor

    @actor.setter
    def actor(self, actor: nn.Module | None) -> None:
        """Set the policy the evaluations during training copy."""
        self.decision.actor = actor

    @property
    def updates(self) -> int:
        """Updates recorded so far (resumed runs included)."""
        return self.writer.updates

    @property
    def env_steps(self) -> int:
        """Env steps of the job so far."""
        return self.writer.env_steps

    @property
    def done(self) -> bool:
        """Whether the env-step budget is spent."""
        return self.writer.done

    @property
    def preempted(self) -> bool:
        """A stop signal arrived before the budget was spent."""
        return self.writer.preempted

    def control(self) -> Control:
        """The decision after an update: go on, or checkpoint and/or stop (and why), as the
        writer decides it for every placement (:meth:`WriterControl.command`)."""
        return self.decision.command()

    @_ends_the_job
    def record(self, reports: Any, gradient_asynchrony: float = 0.0) -> None:
        """Add one update made of the reports' rows (one per gradient worker)."""
        figures = self.layout.combine(reports)
        self._note_env_failures(int(figures["env_failures"]))
        self._count_live(int(figures["live_collectors"]), int(figures["starved_learners"]))
        self.decision.record(figures, gradient_asynchrony)

    @property
    def stop_command(self) -> int:
        """The command bits of a stop before the budget (with why: see
        :attr:`~hpcrl.learning.run_writer.RunWriter.stop_command`)."""
        return self.writer.stop_command

    def _note_env_failures(self, count: int) -> None:
        """``count`` ranks had an env fail for good in this update: take and say their lines
        (rank, env, last error); the job then checkpoints and stops with
        :data:`~hpcrl.runtime.signals.EXIT_ENV_FAILED`."""
        if count <= 0 or self.writer.env_note is not None:
            return
        self._say_failures(self.failures.take(count) or ["an env failed for good"])

    @property
    def collector_ranks(self) -> int:
        """The ranks that collect in the job at its full size."""
        return sum(1 for r in self.job.table if r.collects)

    def _say_failures(self, lines: list[str]) -> None:
        """Say the lines of envs that failed for good, and add them to the stop's note; the
        first failure also says that the job stops (whether a learner's count or a
        checkpoint's failed state told rank 0 first)."""
        if not lines:
            return
        for line in lines:
            self.job.say(f"hpcrl: {line}")
        first = self.writer.env_note is None
        notes = ([self.writer.env_note] if self.writer.env_note else []) + lines
        self.writer.env_note = "; ".join(notes)
        if first:
            self.job.say(f"hpcrl: an env failed for good: checkpointing and stopping with "
                         f"exit status {EXIT_ENV_FAILED}; the checkpoint resumes once the env "
                         f"is fixed (the failed envs start afresh from their seeds)")

    def _count_live(self, live: int, starved: int = 0) -> None:
        """Note how many collecting ranks are live; below ``scheme.min_collectors``, or once
        a learner lost every one of its collectors (``starved``: how many did), the job
        checkpoints and stops (exit status 3, the Slurm templates requeue it whole)."""
        self.live_collectors = live
        if self.job.spares is not None:  # a place a spare is taking is not lost
            live = max(live, self.job.spares.standing())
        bound = self.min_collectors
        if (not self.job.survives or (live >= bound and not starved)
                or self.writer.lost_note is not None or self.writer.env_note is not None):
            return
        lost = ", ".join(str(r) for r in sorted(LOST.ranks()))
        why = (f"fewer than scheme.min_collectors={bound}" if live < bound else
               f"and {starved} of the job's {len(self.job.workers)} learners lost every "
               f"collector of theirs")
        note = (f"{live} of the job's {self.collector_ranks} collector ranks live (lost: "
                f"{lost or 'see above'}), {why}")
        self.writer.lost_note = note
        self.job.say(f"hpcrl: {note}: checkpointing and stopping with exit status 3; the job "
                     f"resumes at its full size")

    def checkpoint_due(self) -> bool:
        """Whether the writer's schedule asks for a checkpoint now."""
        return self.writer.checkpoint_due()

    @_ends_the_job
    def write_checkpoint(self, actor: nn.Module, learner_state: dict[str, Any],
                         collector_states: list[dict[str, Any]]) -> Path:
        """Write the job's state (refused, the previous checkpoint kept, when its weights or
        statistics are not all finite: the job then stops with that message). A collector
        whose env failed for good answered without a state: its place is left out, and
        starts afresh from its seeds on resume (:mod:`~hpcrl.placement.env_failures`)."""
        failed = [int(s["rank"]) for s in collector_states if s.get("env_failed")]
        self._say_failures(self.failures.take_from(failed))  # (another failed meanwhile)
        collector_states = sorted((s for s in collector_states if not s.get("env_failed")),
                                  key=lambda s: s["env_offset"])
        return self.writer.checkpoint(_cpu_copy(actor, self.job),
                                        {"updater": learner_state,
                                         "collectors": collector_states},
                                        world_size=self.job.world.Get_size(),
                                        live_collectors=self.live_collectors,
                                        collector_ranks=self.collector_ranks)

    @_ends_the_job
    def finish(self, actor: nn.Module) -> dict[str, Any] | None:
        """Close the records and run the final evaluation (kept as ``evaluation``; none
        after a stop signal, nor when the run's roles end for a reload)."""
        self.writer.close()
        if self.preempted or self.writer.reloading:  # (a reload goes on: no end yet)
            return None
        self.evaluation = self.writer.final_eval(_cpu_copy(actor, self.job))
        return self.evaluation


def evaluator_ranks(job: LeaderJob, console: IO[str] | None,
                    command: Callable[[], int]) -> RemoteEvaluations | None:
    """Where the evaluations during training are played when the job has evaluator ranks
    (``scheme.evaluators``): their rank 0 side, made for the writer (``command``: the run's
    command bits, which the evaluators leave with); None (rank 0's thread) when it has
    none."""
    ranks = [r.rank for r in job.table if r.role == EVALUATOR]
    if not ranks:
        return None

    def remote(curve: EvalCurve, env_steps: int,
               saved: Callable[[nn.Module], dict[str, Any]]) -> Evaluations:
        every = job.written_config().train.eval_every
        return Evaluations(job.channel, ranks, curve, every, env_steps, job.new_policy(),
                           saved, console, command)
    return remote


def _cpu_copy(actor: nn.Module, job: LeaderJob) -> nn.Module:
    """``actor``, the job's acting policy of either family, on the CPU."""
    if next(actor.parameters()).device.type == "cpu":
        return actor
    # the algorithm's own acting policy built on the CPU (its class's policy_for, as
    # load_policy rebuilds a saved one), its weights copied in
    return weights_into(job.new_policy(), actor)


def weights_into(host: nn.Module, actor: nn.Module) -> nn.Module:
    """``host``, a fresh policy of ``actor``'s class on the CPU, holding ``actor``'s weights
    and buffers (from whatever device they are on)."""
    host.load_state_dict({k: v.cpu() for k, v in actor.state_dict().items()})
    return host

