"""Asynchronous gradients (A3C): workers send gradients, the updater applies each on arrival.

A worker sends every gradient with its info and the report of its previous update, then
waits for the weights the updater made with it: only that worker gets them. The updater
never waits for a particular worker; it records a row whenever a report arrives, and answers
the next gradient of each worker with STOP once the budget is spent, or CHECKPOINT to have
the worker (and its collectors) send their states.

A worker is a learner of the one learner loop (:func:`~hpcrl.learning.loop.run_learner`)
whose decision is the updater's (:class:`UpdaterDecision`). The updater is the one rank that
does not run that loop: it answers gradients as they arrive and records a row per report,
so its unit of work is one worker's gradient, not an update.
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np

from hpcrl.build import make_storage
from hpcrl.config.validate import minibatches_per_epoch
from hpcrl.core.compiling import compile_loss
from hpcrl.learning.loop import run_learner
from hpcrl.placement.mpi.job import MpiJob
from hpcrl.placement.mpi.latest_weights import ParamsReceiver, send_weights
from hpcrl.placement.mpi.leader import Leader
from hpcrl.placement.mpi.learners import collector_state_for, make_updater
from hpcrl.placement.mpi.lost_collectors import CollectorWatch
from hpcrl.placement.mpi.rollout_source import AsyncCollectors, OwnEnvs, SyncCollectors
from hpcrl.roles.gradient_worker import GradientWorker
from hpcrl.roles.messages import Gradient, Weights
from hpcrl.roles.protocol import (
    CHECKPOINT,
    CONTROL_LAYOUT,
    PREEMPTED,
    STOP,
    TAG_GRAD,
    TAG_GRAD_INFO,
    TAG_REPORT,
    TAG_STATE,
    TAG_WEIGHTS,
    Control,
    Report,
    ReportLayout,
)
from hpcrl.scheme import COLLECTOR

UPDATER_RANK = 0


class AsyncWorkerRank:
    """A gradient worker whose gradients are applied on their own by the updater."""

    def __init__(self, job: MpiJob, resume: dict[str, Any] | None) -> None:
        cfg = job.config
        self.job, self.channel = job, job.channel
        self.algorithm = job.new_algorithm()
        self.actor = self.algorithm.actor
        if cfg.train.compile:
            compile_loss(self.algorithm, job.device)
        storage = make_storage(cfg, job.spaces, job.device)
        self.worker = GradientWorker(self.algorithm, storage, cfg.seed, job.total_envs,
                                     minibatches_per_epoch(cfg))
        self.weights = Weights.empty_like(self.actor)
        self.params = ParamsReceiver(self.channel, self.weights, UPDATER_RANK, job.codec)
        self.version = 0
        if resume is not None:
            self.actor.load_state_dict(resume["policy"]["state_dict"])
            self.version = int(resume["placement"]["updater"]["version"])
        if job.role.collects:
            self.source: Any = OwnEnvs(job, collector_state_for(resume, job.role.env_offset))
        elif cfg.scheme.collection == "async":
            self.source = AsyncCollectors(job)
        else:
            self.source = SyncCollectors(job)
        self.layout = ReportLayout(self.algorithm.stat_names)
        self.report = self.layout.new()
        counters = resume["counters"] if resume is not None else {"env_steps": 0}
        self.job_steps = int(counters["env_steps"])
        self.update = 0
        self.command = 0  # what the updater's weights said during the current update
        self.preempted = False

    def _exchange(self, gradient: Gradient, times: dict[str, float]) -> int:
        """Send one gradient (with the last report), receive the weights it made."""
        t = time.perf_counter()
        sends = [self.channel.isend(gradient.host(), UPDATER_RANK, TAG_GRAD),
                 self.channel.isend(gradient.info.data, UPDATER_RANK, TAG_GRAD_INFO),
                 self.channel.isend(self.report.data, UPDATER_RANK, TAG_REPORT)]
        for request in sends:
            self.channel.wait(request)
        self.report.data[:] = 0.0
        w = self.weights
        self.channel.wait(self.channel.irecv(w.header.data, UPDATER_RANK, TAG_WEIGHTS))
        self.channel.wait(self.params.post())
        self.params.unpack()
        self.worker.load_weights(w)
        self.version = w.version
        times["comm"] += time.perf_counter() - t
        return w.command

    def start(self) -> None:
        """Publish the first weights to the rollout source."""
        self.source.publish(self.actor, self.version)

    def learn_update(self) -> Report:
        """Gather rollouts, send each gradient to the updater and take the weights it made
        (with the command they carry: the updater decides); returns the update's report."""
        cfg = self.job.config
        per_update = cfg.algo.num_steps * self.source_envs * len(self.job.workers)
        rollouts, t_collect, t_wait = self.source.gather(self.update, self.version)
        progress = (self.job_steps + per_update) / cfg.train.total_env_steps
        times = {"compute": 0.0, "comm": 0.0}
        report = self.layout.new()
        self.command = 0
        if self.source.starved:
            return self._starved(report, t_wait, times)
        lag = float(np.mean([self.version - r.weights_version for r in rollouts]))
        t = time.perf_counter()
        for gradient in self.worker.gradients(rollouts, self.update, progress):
            times["compute"] += time.perf_counter() - t
            self.layout.add_stats(report, gradient.stats())
            self.command |= self._exchange(gradient, times)
            if self.command & STOP:
                break
            t = time.perf_counter()
        self.job_steps += per_update
        self.layout.fill_update(report, rollouts, lag, t_collect, t_wait, times,
                                self.source.dropped, self.algorithm.learning_rate,
                                self.source.live_collectors)
        self.source.dropped = 0
        self.update += 1
        return report

    def _starved(self, report: Report, t_wait: float, times: dict[str, float]) -> Report:
        """Every collector of this worker was lost: tell the updater, with the report that
        waits for the next gradient marked starved (the gradient it carries is never
        applied), and take its command: the job checkpoints and stops."""
        self.report.set(starved_learners=1.0, live_collectors=0.0)
        self.command |= self._exchange(self.worker.message, times)
        self.layout.fill_update(report, [], 0.0, 0.0, t_wait, times, self.source.dropped,
                                self.algorithm.learning_rate, 0, starved=True)
        self.source.dropped = 0
        self.update += 1
        return report

    def end_update(self, control: Control) -> None:
        """Send the collectors' states on CHECKPOINT, then publish the weights carrying the
        command (closing the source on STOP)."""
        command = int(control.command)
        if command & CHECKPOINT:
            for state in self.source.states():
                self.channel.send_object(state, UPDATER_RANK, TAG_STATE)
        if command & STOP:
            self.source.close(self.actor, self.version, command)
        else:
            self.source.publish(self.actor, self.version, command)

    def finish(self) -> None:
        """Nothing to close: the updater ends the run."""

    def run(self) -> None:
        """Until STOP: the learner loop (:func:`~hpcrl.learning.loop.run_learner`), deciding as
        the updater said (:class:`UpdaterDecision`)."""
        run_learner(self, UpdaterDecision(self))

    @property
    def source_envs(self) -> int:
        """Envs of this worker's rollout source: its own, or its collectors'."""
        return self.job.config.env.num_envs * max(self.job.config.scheme.collectors_per_worker, 1)


class UpdaterDecision:
    """The decision of an asynchronous gradient worker (an
    :class:`~hpcrl.learning.loop.UpdateControl`): the updater's, which came with the weights
    of the worker's gradients during the update. The worker's report goes to the updater,
    which records it, with its next gradient."""

    def __init__(self, worker: AsyncWorkerRank) -> None:
        self.worker = worker

    def decide(self, report: Report) -> Control:
        """Keep ``report`` for the next gradient; the command is the updater's."""
        worker = self.worker
        worker.report.copy_from(report)
        control = CONTROL_LAYOUT.new()
        control.set(command=worker.command, env_steps=worker.job_steps)
        return control


class AsyncUpdaterRank:
    """Applies gradients in arrival order; each reply goes to the worker that sent it."""

    def __init__(self, job: MpiJob, resume: dict[str, Any] | None, leader: Leader) -> None:
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
        self.live = [max(job.config.scheme.collectors_per_worker, 1)] * len(self.workers)
        self.states: dict[int, dict[str, Any]] = {}
        self.written = 0
        self.checkpoint_for: set[int] = set()  # workers still to be told of the open round
        self.round_open = False  # a checkpoint round whose states are not all in yet
        self.asynchrony: list[float] = []
        self.preempted = False

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
        cfg = self.job.config
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
            command = STOP if self.leader.done else 0
            if self.leader.preempted:
                command = STOP | PREEMPTED
                self.preempted = True
            if not command and not starved:
                self.asynchrony.append(float(self.updater.version - gradient.weights_version))
                gradient.info.set(progress=min(self.leader.env_steps / cfg.train.total_env_steps,
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
