"""The updater ranks: the role of its own that a central or asynchronous scheme adds.

A decentralised scheme has none (every gradient worker applies the averaged gradient
itself). A central synchronous scheme's updater (:class:`SyncUpdaterRank`) takes part in
exactly the same collectives, in the same order, as its gradient workers
(:class:`~hpcrl.placement.wiring.gradient_routes.ToCentralUpdater`): it sums their gradients,
applies the mean and broadcasts the weights. An asynchronous (A3C) scheme's updater
(:class:`AsyncUpdaterRank`) applies each worker's gradient as it arrives and answers that
worker alone (:class:`~hpcrl.placement.wiring.gradient_routes.ToAsyncUpdater`); it records a
row whenever a report arrives and answers the next gradient of each worker with STOP once
the budget is spent, or CHECKPOINT to have the worker (and its collectors) send their
states. It is the one rank that does not run the learner loop: its unit of work is one
worker's gradient, not an update.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Protocol, cast

import numpy as np

from hpcrl.algorithms.on_policy import OnPolicyAlgorithm
from hpcrl.collection.info_reducers import combine_infos
from hpcrl.comm.collectives import bcast_, gather_rows, reduce_sum_
from hpcrl.exchange.latest_weights import send_weights
from hpcrl.exchange.lost_collectors import CollectorWatch
from hpcrl.exchange.messages import Gradient
from hpcrl.exchange.protocol import (
    CHECKPOINT,
    ENV_FAILED,
    STOP,
    TAG_GRAD,
    TAG_GRAD_INFO,
    TAG_REPORT,
    TAG_STATE,
    Control,
    Report,
    ReportLayout,
)
from hpcrl.learning.loop import run_learner
from hpcrl.learning.updater import Updater
from hpcrl.placement.leader import Leader
from hpcrl.placement.ranks.job_control import JobControl, LearnersJob, write_checkpoint
from hpcrl.placement.wiring.gradient_routes import starved_learners
from hpcrl.scheme import COLLECTOR

if TYPE_CHECKING:  # annotations only
    from hpcrl.algorithms.algorithm import Algorithm
    from hpcrl.numerics.reducer import Reducer
    from hpcrl.sections.schema import TrainConfig


class UpdaterJob(LearnersJob, Protocol):
    """What an updater rank reads of its job: what every learner that exchanges with the
    others reads (:class:`~hpcrl.placement.ranks.job_control.LearnersJob`), the algorithm,
    the ``train`` section (its budget) and the minibatches of an epoch."""

    @property
    def train(self) -> TrainConfig:
        """The ``train`` section (``total_env_steps``)."""

    @property
    def minibatches_per_epoch(self) -> int:
        """The minibatches each epoch over an update cuts."""

    def new_algorithm(self, reducer: Reducer | None = None) -> Algorithm:
        """The job's algorithm on its device."""


def make_updater(job: UpdaterJob, resume: dict[str, Any] | None) -> Updater:
    """The updater of a central scheme, with its master actor (restored on resume)."""
    # an updater rank is a scheme's only where the algorithm learns from rollouts
    algorithm = cast(OnPolicyAlgorithm, job.new_algorithm())
    actor, updater = algorithm.actor, Updater(algorithm)
    if resume is not None:
        actor.load_state_dict(resume["policy"]["state_dict"])
        updater.load_state_dict(resume["placement"]["updater"])
    return updater


class SyncUpdaterRank:
    """The updater of a central synchronous scheme: sums, applies and broadcasts."""

    def __init__(self, job: UpdaterJob, resume: dict[str, Any] | None, leader: Leader) -> None:
        self.job, self.leader = job, leader
        self.updater = make_updater(job, resume)
        self.algorithm, self.actor = self.updater.algorithm, self.updater.algorithm.actor
        self.layout = ReportLayout(self.algorithm.stat_names)
        self.gradient = Gradient.for_actor(self.actor, len(self.algorithm.stat_names),
                                           job.device)
        self.steps = self.algorithm.steps_per_update(job.minibatches_per_epoch)
        self.preempted = False
        self.env_failed = False

    def start(self) -> None:
        """Nothing to publish: the workers start from the same weights."""

    def learn_update(self) -> Report:
        """Each gradient step of an update: sum the workers' gradients (their mean applied),
        broadcast the new weights; returns the updater's report (its applied steps)."""
        learners, g = self.job.learners, self.gradient
        n_workers = len(self.job.workers)
        report = self.layout.new()
        if starved_learners(self.job.learners, False):  # the workers skip the update's steps
            return report
        for _ in range(self.steps):
            g.grads.zero_()
            reduce_sum_(learners, g.host(), root=0)
            infos = gather_rows(learners, g.info.data, root=0)
            assert infos is not None  # the updater is the learners' rank 0, the root
            g.grads.div_(n_workers)
            combine_infos(infos[1:], g.info)
            self.updater.step(g)
            self.layout.add_applied(report, self.updater.last_stats["grad_norm"])
            weights = self.updater.weights()
            bcast_(learners, weights.header.data, root=0)
            bcast_(learners, weights.params, root=0)
        return report

    def end_update(self, control: Control) -> None:
        """Write the checkpoint when asked, with the workers' collector states."""
        if control.command & CHECKPOINT:
            gathered = self.job.learners.gather([], root=0)
            write_checkpoint(self.job, self.leader, self.actor, self.updater.state_dict(),
                             gathered, self.updater.version)

    def finish(self) -> None:
        """The final evaluation."""
        self.leader.finish(self.actor)

    def run(self) -> None:
        """Update until STOP (:func:`~hpcrl.learning.loop.run_learner`), deciding each command
        as the job's leader."""
        run_learner(self, JobControl(self.job.learners, self.leader))


class AsyncUpdaterRank:
    """Applies gradients in arrival order; each reply goes to the worker that sent it."""

    def __init__(self, job: UpdaterJob, resume: dict[str, Any] | None, leader: Leader) -> None:
        self.job, self.channel, self.leader = job, job.channel, leader
        self.updater = make_updater(job, resume)
        self.algorithm, self.actor = self.updater.algorithm, self.updater.algorithm.actor
        stats = len(self.algorithm.stat_names)
        self.workers = job.workers
        self.inbox = [Gradient.for_actor(self.actor, stats, job.device) for _ in self.workers]
        self.layout = ReportLayout(self.algorithm.stat_names)
        self.reports = [self.layout.new() for _ in self.workers]
        self.requests = [self._post(i) for i in range(len(self.workers))]
        self.collecting = sum(1 for r in job.table if r.collects)
        # the dedicated collectors whose states a checkpoint round waits for
        self.state_watch = CollectorWatch(job, [r.rank for r in job.table
                                                if r.role == COLLECTOR])
        self.live = [max(job.scheme.collectors_per_worker, 1)] * len(self.workers)
        self.states: dict[int, dict[str, Any]] = {}
        self.written = 0
        self.checkpoint_for: set[int] = set()  # workers still to be told of the open round
        self.round_open = False  # a checkpoint round whose states are not all in yet
        self.asynchrony: list[float] = []
        self.preempted = False
        self.env_failed = False

    def _post(self, i: int) -> list:
        w = self.workers[i]
        return [self.channel.irecv(self.inbox[i].host(), w, TAG_GRAD),
                self.channel.irecv(self.inbox[i].info.data, w, TAG_GRAD_INFO),
                self.channel.irecv(self.reports[i].data, w, TAG_REPORT)]

    def _next(self, active: set[int]) -> int:
        """Index of a worker whose gradient arrived; keeps collecting states meanwhile."""
        delay = 50e-6
        while True:
            for i in active:
                if all(self.channel.test(r) for r in self.requests[i]):
                    return i
            if self._take_states():
                continue
            time.sleep(delay)
            delay = min(delay * 2, 2e-3)

    def _take_states(self) -> bool:
        envelope = self.channel.probe(tag=TAG_STATE)
        if envelope is None:
            if self.round_open:
                self._round_complete()  # a collector lost meanwhile is not waited for
            return False
        state = self.channel.recv_object(envelope.source, TAG_STATE)
        self.states[int(state["env_offset"])] = state
        self.state_watch.arrived(envelope.source, "state")
        self._round_complete()
        return True

    def _round_complete(self) -> None:
        """Write the checkpoint once every live collecting rank's state is in (a collector
        waited for past ``scheme.collector_timeout_s`` is lost: the round goes without it)."""
        self.state_watch.check_overdue()
        live = {r.env_offset for r in self.job.table
                if r.collects and not self.state_watch.is_lost(r.rank)}
        if live <= set(self.states):
            self.leader.write_checkpoint(self.actor, self.updater.state_dict(),
                                         list(self.states.values()))
            self.states = {}
            self.written += 1
            self.round_open = False

    def _open_round(self, workers: set[int]) -> None:
        """Ask ``workers`` for their states, unless a round is still open: rounds never
        overlap, so each worker's state of a round is the one written with it (a worker
        told twice would send two states, and one of them would be written with another
        worker's older one and leave the last unread)."""
        if not self.round_open:
            self.checkpoint_for = set(workers)
            self.round_open = True
            for rank in self.state_watch.ranks:
                self.state_watch.waiting(rank, "state")

    def run(self) -> None:
        """Apply each worker's gradient as it arrives and answer that worker alone, recording a row
        per report, opening checkpoint rounds when due and STOPping every worker at the end."""
        total_env_steps = self.job.train.total_env_steps
        active = set(range(len(self.workers)))
        final_written: int | None = None
        while active:
            i = self._next(active)
            report = self.reports[i]
            starved = report.starved_learners > 0  # its gradient is none: never applied
            if (report.gradients > 0 or starved) and not self.leader.done:
                async_mean = float(np.mean(self.asynchrony)) if self.asynchrony else 0.0
                self.asynchrony = []
                # the steps this updater dropped for a non-finite gradient (skip_update)
                report.set(skipped_updates=self.algorithm.guard.take_skipped())
                # a report is one worker's: the job's live collectors are every worker's last
                self.live[i] = int(report.live_collectors)
                report.set(live_collectors=sum(self.live))
                self.leader.record(report.data[None, :], gradient_asynchrony=async_mean)
                if self.leader.checkpoint_due():
                    self._open_round(set(range(len(self.workers))))
            gradient = self.inbox[i]
            # the budget's end, or the interval hook's reload (a PBT member's copy, a league
            # exploiter's reset): every worker stops after the round's last checkpoint
            command = STOP if self.leader.done or self.leader.writer.reloading else 0
            if self.leader.preempted:
                command = self.leader.stop_command
                self.preempted = True
                self.env_failed = bool(command & ENV_FAILED)
            if not command and not starved:
                self.asynchrony.append(float(self.updater.version - gradient.weights_version))
                gradient.info.set(progress=min(self.leader.env_steps / total_env_steps,
                                               1.0))
                self.updater.step(gradient)
            elif final_written is None:
                # the last checkpoint: the open round, or a new one for every worker's STOP
                self._open_round(set(active))
                final_written = self.written + 1
            if i in self.checkpoint_for:
                command |= CHECKPOINT
                self.checkpoint_for.discard(i)
            weights = self.updater.weights().set_command(command)
            worker = self.workers[i]
            for request in send_weights(self.channel, weights, worker, True, self.job.codec):
                self.channel.wait(request)
            if command & STOP:
                active.discard(i)
            else:
                self.requests[i] = self._post(i)
        while final_written is not None and self.written < final_written:
            if not self._take_states():
                time.sleep(1e-3)
        self.leader.finish(self.actor)
