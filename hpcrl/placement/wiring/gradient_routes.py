"""The three routes an on-policy gradient step takes across a job's learners.

A gradient worker computes each gradient step of an update the same way whatever the
scheme (:class:`~hpcrl.placement.wiring.rollout_updates.RolloutUpdates`); what differs is
where the gradient goes and where the new weights come from, which is the route's:

* :class:`AllReduced` (``scheme.update=decentral``, and a one-process run): the workers
  average it in place (all-reduce, none with one worker) and every worker applies it with
  its own optimiser (:class:`~hpcrl.learning.updater.Updater`);
* :class:`ToCentralUpdater` (``scheme.update=central``, synchronous): the workers' gradients
  are summed onto the updater rank, which applies their mean and broadcasts the weights;
* :class:`ToAsyncUpdater` (``scheme.gradients=async``, A3C): each gradient is sent to the
  updater on its own and the weights it made come back to this worker alone, carrying the
  updater's command (the updater decides for the job: :class:`UpdaterDecision`).

The route also says how the update's decision is taken and how the collectors' states reach
a checkpoint: gathered on rank 0 through the learners' communicator (synchronous routes), or
sent to the updater, which writes (asynchronous).
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Protocol

from hpcrl.comm import MpiAllreducer, make_allreducer, sum_host_array_
from hpcrl.comm.collectives import any_rank, bcast_, gather_rows, reduce_sum_
from hpcrl.exchange.latest_weights import ParamsReceiver
from hpcrl.exchange.messages import Gradient, Weights
from hpcrl.exchange.protocol import (
    CHECKPOINT,
    CONTROL_LAYOUT,
    TAG_GRAD,
    TAG_GRAD_INFO,
    TAG_REPORT,
    TAG_STATE,
    TAG_WEIGHTS,
    Control,
    Report,
    ReportLayout,
)
from hpcrl.learning.loop import UpdateControl
from hpcrl.learning.updater import Updater
from hpcrl.numerics.reducer import Reducer
from hpcrl.placement.leader import Leader
from hpcrl.placement.ranks.job_control import JobControl, LearnersJob, write_checkpoint

if TYPE_CHECKING:

    from hpcrl.algorithms.on_policy import OnPolicyAlgorithm
    from hpcrl.learning.gradient_worker import GradientWorker
    from hpcrl.placement.wiring.rollout_updates import RolloutUpdates

UPDATER_RANK = 0  # an updater, where the scheme has one, is rank 0


class RouteJob(LearnersJob, Protocol):
    """What a gradient route reads of its gradient worker's job: what every learner that
    exchanges with the others reads (:class:`~hpcrl.placement.ranks.job_control.LearnersJob`),
    the gradient workers' communicator (their all-reduce) and whether running moments
    travel with the gradients."""

    gradient: Any

    @property
    def normalizes(self) -> bool:
        """Whether running moments travel with the gradients."""


class SynchronousRoute:
    """What the two synchronous routes share: every learner agrees on a starved update
    (they take their gradient steps in lock step) and rank 0's leader decides for all."""

    job: RouteJob
    leader: Leader | None

    def starved(self, own: bool, message: Gradient, times: dict[str, float],
                env_failures: int = 0) -> bool:
        """Whether a learner cannot learn this update (it lost every collector, or an env
        failed for good: ``env_failures`` goes in its report), agreed by every learner (an
        updater rank takes part)."""
        return starved_learners(self.job.learners, own)

    def control(self, updates: RolloutUpdates) -> UpdateControl:
        """Rank 0's leader decides for every learner."""
        return JobControl(self.job.learners, self.leader)


class AllReduced(SynchronousRoute):
    """Decentralised: every worker averages each gradient over the workers in place and
    applies it with its own optimiser; the update's decision is rank 0's leader's."""

    shares_actor = True  # its own envs may act with the learner's actor as it is (CPU)
    resumes_update_count = True

    def __init__(self, job: RouteJob, algorithm: OnPolicyAlgorithm,
                 leader: Leader | None) -> None:
        self.job, self.leader = job, leader
        numel = sum(p.numel() for p in algorithm.actor.parameters())
        self.allreducer = (make_allreducer(job.scheme.allreduce, job.gradient,
                                           job.device, numel)
                           if len(job.workers) > 1 else None)
        self.updater = Updater(algorithm)
        self.normalizing = job.normalizes  # gradients carry moments to sum
        self.command = 0

    def statistics_reducer(self) -> Reducer | None:
        """Where the minibatch statistics (advantage moments, 3 numbers a minibatch) cross
        the workers: the gradients' all-reducer on a GPU (NCCL), MPI otherwise, none with
        one worker."""
        return statistics_reducer(self.job, self.allreducer)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore this worker's optimiser from the checkpoint's updater state."""
        self.updater.load_state_dict(state)

    def step(self, gradient: Gradient, worker: GradientWorker, times: dict[str, float],
             report: Report, layout: ReportLayout) -> int:
        """Average ``gradient`` over the workers and apply it to ``worker``'s own actor;
        returns the new version."""
        t = time.perf_counter()
        if self.allreducer is not None:  # in place, on the device backward wrote it on
            self.allreducer.average_(gradient.grads)
            if self.normalizing and gradient.new_env_steps:
                moments = gradient.moments.to_sums_()
                sum_host_array_(self.allreducer, moments.block(), self.job.device)
                moments.from_sums_()
        times["comm"] += time.perf_counter() - t
        t = time.perf_counter()
        self.updater.step(gradient)
        times["compute"] += time.perf_counter() - t
        layout.add_applied(report, self.updater.last_stats["grad_norm"])
        return self.updater.version

    def checkpoint(self, updates: RolloutUpdates, command: int, publish: Any) -> None:
        """Publish the weights carrying ``command``; on CHECKPOINT, every learner's
        collector states are gathered on rank 0, which writes them with its optimiser."""
        gathered_checkpoint(self.job, self.leader, updates, command, publish,
                            self.updater.state_dict())

    def finish(self) -> None:
        """Release the all-reducer."""
        if self.allreducer is not None:
            self.allreducer.close()


class ToCentralUpdater(SynchronousRoute):
    """Central synchronous: each gradient is summed onto the updater rank, which applies the
    workers' mean and broadcasts the new weights to every worker."""

    shares_actor = True
    resumes_update_count = True

    def __init__(self, job: RouteJob, algorithm: OnPolicyAlgorithm,
                 leader: Leader | None) -> None:
        self.job, self.leader = job, leader
        self.weights = Weights.empty_like(algorithm.actor)
        self.command = 0

    def statistics_reducer(self) -> Reducer | None:
        """MPI across the workers (none with one worker)."""
        return statistics_reducer(self.job, None)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Nothing: the updater rank holds the optimiser."""

    def step(self, gradient: Gradient, worker: GradientWorker, times: dict[str, float],
             report: Report, layout: ReportLayout) -> int:
        """Sum ``gradient`` onto the updater and load the weights it broadcasts into
        ``worker``; returns their version."""
        t = time.perf_counter()
        learners = self.job.learners
        reduce_sum_(learners, gradient.host(), root=0)
        gather_rows(learners, gradient.info.data, root=0)
        bcast_(learners, self.weights.header.data, root=0)
        bcast_(learners, self.weights.params, root=0)
        worker.load_weights(self.weights)
        times["comm"] += time.perf_counter() - t
        return self.weights.version

    def checkpoint(self, updates: RolloutUpdates, command: int, publish: Any) -> None:
        """Publish; on CHECKPOINT this worker's collector states go to the updater (rank 0)."""
        gathered_checkpoint(self.job, self.leader, updates, command, publish, None)

    def finish(self) -> None:
        """Nothing to release."""


class ToAsyncUpdater:
    """Asynchronous (A3C): each gradient goes to the updater with this worker's last report,
    and the weights it made come back to this worker alone with the updater's command."""

    shares_actor = False  # weights arrive from the updater into a copy
    resumes_update_count = False  # its updates are its own, not the job's rows

    def __init__(self, job: RouteJob, algorithm: OnPolicyAlgorithm,
                 leader: Leader | None) -> None:
        self.job, self.channel = job, job.channel
        self.weights = Weights.empty_like(algorithm.actor)
        self.params = ParamsReceiver(self.channel, self.weights, UPDATER_RANK, job.codec)
        self.pending = ReportLayout(algorithm.stat_names).new()  # the report sent next
        self.command = 0  # what the updater's weights said during the current update

    def statistics_reducer(self) -> Reducer | None:
        """None: each worker's minibatches are its own."""
        return None

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Nothing: the updater rank holds the optimiser."""

    def _exchange(self, gradient: Gradient, times: dict[str, float]) -> Weights:
        """Send one gradient (with the last report), receive the weights it made."""
        t = time.perf_counter()
        sends = [self.channel.isend(gradient.host(), UPDATER_RANK, TAG_GRAD),
                 self.channel.isend(gradient.info.data, UPDATER_RANK, TAG_GRAD_INFO),
                 self.channel.isend(self.pending.data, UPDATER_RANK, TAG_REPORT)]
        for request in sends:
            self.channel.wait(request)
        self.pending.data[:] = 0.0
        w = self.weights
        self.channel.wait(self.channel.irecv(w.header.data, UPDATER_RANK, TAG_WEIGHTS))
        self.channel.wait(self.params.post())
        self.params.unpack()
        self.command |= w.command
        times["comm"] += time.perf_counter() - t
        return w

    def starved(self, own: bool, message: Gradient, times: dict[str, float],
                env_failures: int = 0) -> bool:
        """Every collector of this worker was lost, or an env failed for good: the updater
        is told with the report that waits for the next gradient marked starved (the
        gradient it carries is never applied), and its command taken: the job checkpoints
        and stops."""
        if not own:
            return False
        self.pending.set(starved_learners=1.0, live_collectors=0.0,
                         env_failures=float(env_failures))
        self._exchange(message, times)
        return True

    def step(self, gradient: Gradient, worker: GradientWorker, times: dict[str, float],
             report: Report, layout: ReportLayout) -> int:
        """Send ``gradient`` to the updater and load the weights it made into ``worker``;
        returns their version."""
        weights = self._exchange(gradient, times)
        t = time.perf_counter()
        worker.load_weights(weights)
        times["comm"] += time.perf_counter() - t
        return weights.version

    def control(self, updates: RolloutUpdates) -> UpdateControl:
        """The updater's decision, which came with the weights during the update."""
        return UpdaterDecision(self, updates)

    def checkpoint(self, updates: RolloutUpdates, command: int, publish: Any) -> None:
        """On CHECKPOINT the collectors' states go to the updater, which writes them; then
        publish the weights carrying ``command``."""
        if command & CHECKPOINT:
            for state in updates.source.states():
                self.channel.send_object(state, UPDATER_RANK, TAG_STATE)
        publish(command)

    def finish(self) -> None:
        """Nothing to close: the updater ends the run."""


GradientRoute = AllReduced | ToCentralUpdater | ToAsyncUpdater


def route_for(job: RouteJob, algorithm: OnPolicyAlgorithm,
              leader: Leader | None) -> GradientRoute:
    """The route of ``job``'s scheme (``scheme.gradients``, ``scheme.update``)."""
    s = job.scheme
    if s.gradients == "async":
        return ToAsyncUpdater(job, algorithm, leader)
    if s.update == "central":
        return ToCentralUpdater(job, algorithm, leader)
    return AllReduced(job, algorithm, leader)


def statistics_reducer(job: RouteJob, allreducer: Any) -> Reducer | None:
    """How the minibatch statistics of several gradient workers are summed: the gradients'
    all-reducer where it runs on a GPU (NCCL), MPI over the workers otherwise; none with one
    worker."""
    if len(job.workers) < 2:
        return None
    if job.device.type == "cuda" and allreducer is not None:
        return allreducer  # type: ignore[no-any-return]
    return MpiAllreducer(job.gradient)


def starved_learners(learners: Any, starved: bool) -> bool:
    """Whether a learner of a job (``learners``: the communicator of its learner ranks, None
    with one) cannot learn this update (``starved``: this one cannot):
    it lost every collector, or an env it learns from failed for good. Agreed by all
    learner ranks (one small all-reduce an update, none with one learner rank), which then
    skip the update's gradient steps together (they take them in lock step) and the job
    checkpoints and stops."""
    return any_rank(learners, starved)


def gathered_checkpoint(job: RouteJob, leader: Leader | None, updates: RolloutUpdates,
                        command: int, publish: Any, learner_state: Any) -> None:
    """Publish the weights carrying ``command``; on CHECKPOINT, gather every learner's
    collector states on rank 0 first, which writes them (with ``learner_state``, this
    worker's optimiser, where the workers hold one) once the weights are out."""
    gathered = (job.learners.gather(updates.source.states(), root=0)
                if command & CHECKPOINT else None)
    publish(command)
    if gathered is not None and leader is not None:
        write_checkpoint(job, leader, updates.actor, learner_state, gathered,
                         updates.version, getattr(updates.source, "after_update", None))


class UpdaterDecision:
    """The decision of an asynchronous gradient worker (an
    :class:`~hpcrl.learning.loop.UpdateControl`): the updater's, which came with the weights
    of the worker's gradients during the update. The worker's report goes to the updater,
    which records it, with its next gradient."""

    def __init__(self, route: ToAsyncUpdater, updates: RolloutUpdates) -> None:
        self.route, self.updates = route, updates

    def decide(self, report: Report) -> Control:
        """Keep ``report`` for the next gradient; the command is the updater's."""
        self.route.pending.copy_from(report)
        control = CONTROL_LAYOUT.new()
        control.set(command=self.route.command,
                    env_steps=self.updates.env_steps + self.updates.learnt_steps)
        return control
