"""Gradient-worker and updater ranks for every synchronous topology, and the serial run.

Both are learners of the one learner loop (:func:`~hpcrl.learning.loop.run_learner`); the
serial placement runs the same :meth:`WorkerRank.learn_update` over a communicator of one
process. Per update:

1. rollouts come from the worker's own envs or its collectors (``rollout_source``);
2. each gradient step is combined over the gradient workers: all-reduced and applied by
   every worker (decentralised), or summed onto the updater, applied there and broadcast
   back (central);
3. the learners' reports are gathered on rank 0, whose leader records the update and
   decides whether to go on, to checkpoint, or to stop (:class:`JobControl`);
4. the new weights (carrying that command) go out to the collectors.

The updater of a central synchronous scheme (:class:`SyncUpdaterRank`) takes part in exactly
the same collectives in the same order.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from hpcrl.build import make_storage
from hpcrl.comm import MpiAllreducer, make_allreducer, sum_host_array_
from hpcrl.comm.collectives import any_rank, bcast_, gather_rows, reduce_sum_
from hpcrl.config.validate import minibatches_per_epoch
from hpcrl.core.compiling import compile_loss
from hpcrl.learning.loop import run_learner
from hpcrl.placement.mpi.collector_states import collect_states
from hpcrl.placement.mpi.job import MpiJob
from hpcrl.placement.mpi.leader import Leader
from hpcrl.placement.mpi.reducers import combine_infos
from hpcrl.placement.mpi.rollout_source import AsyncCollectors, OwnEnvs, SyncCollectors
from hpcrl.roles.gradient_worker import GradientWorker
from hpcrl.roles.messages import Gradient, Weights
from hpcrl.roles.protocol import (
    CHECKPOINT,
    CONTROL_LAYOUT,
    STOP,
    Control,
    Report,
    ReportLayout,
)
from hpcrl.roles.updater import Updater


def collector_state_for(state: dict[str, Any] | None, offset: int) -> dict | None:
    """This rank's collector state in a checkpoint (by global env offset), if any."""
    if state is None:
        return None
    for entry in state["placement"]["collectors"]:
        if entry["env_offset"] == offset:
            return entry
    return None


class WorkerRank:
    """A gradient worker in a synchronous-gradient scheme (decentralised or central)."""

    def __init__(self, job: MpiJob, resume: dict[str, Any] | None,
                 leader: Leader | None) -> None:
        cfg, s = job.config, job.config.scheme
        self.job, self.leader = job, leader
        self.central = s.update == "central"
        numel = sum(p.numel() for p in job.new_actor().parameters())
        n_workers = len(job.workers)
        self.allreducer = (make_allreducer(s.allreduce, job.gradient, job.device, numel)
                           if not self.central and n_workers > 1 else None)
        reducer = None  # advantage moments (3 numbers a minibatch) cross the workers...
        if n_workers > 1:  # ...on the GPU through the gradients' all-reducer (NCCL), else MPI
            on_gpu = job.device.type == "cuda" and self.allreducer is not None
            reducer = self.allreducer if on_gpu else MpiAllreducer(job.gradient)
        self.algorithm = job.new_algorithm(reducer)
        self.actor = self.algorithm.actor
        if cfg.train.compile:
            compile_loss(self.algorithm, job.device)
        storage = make_storage(cfg, job.spaces, job.device)
        self.worker = GradientWorker(self.algorithm, storage, cfg.seed, job.total_envs,
                                     minibatches_per_epoch(cfg))
        self.updater = None if self.central else Updater(self.algorithm)
        self.weights = Weights.empty_like(self.actor)
        self.version = 0
        if resume is not None:
            self.actor.load_state_dict(resume["policy"]["state_dict"])
            self.version = int(resume["placement"]["updater"]["version"])
            if self.updater is not None:
                self.updater.load_state_dict(resume["placement"]["updater"])
        if job.role.collects:  # on the CPU, its collector acts with this very actor
            shared = self.actor if job.device.type == "cpu" else None
            self.source: Any = OwnEnvs(job, collector_state_for(resume, job.role.env_offset),
                                       shared)
        elif s.collection == "async":
            self.source = AsyncCollectors(job)
        else:
            self.source = SyncCollectors(job)
        self.layout = ReportLayout(self.algorithm.stat_names)
        counters = resume["counters"] if resume is not None else {"updates": 0, "env_steps": 0}
        self.update, self.env_steps = int(counters["updates"]), int(counters["env_steps"])
        self.preempted = False
        self.normalizing = (cfg.env.normalize_obs or cfg.env.normalize_reward
                            or cfg.rnd.enabled)  # gradients carry moments to sum

    # -- one gradient step -------------------------------------------------------------------
    def _step(self, gradient: Gradient, times: dict[str, float], report: Report) -> None:
        """Combine ``gradient`` over the workers and apply it (here, or on the updater)."""
        t = time.perf_counter()
        learners = self.job.learners
        if self.central:
            reduce_sum_(learners, gradient.host(), root=0)
            gather_rows(learners, gradient.info.data, root=0)
            bcast_(learners, self.weights.header.data, root=0)
            bcast_(learners, self.weights.params, root=0)
            self.worker.load_weights(self.weights)
            self.version = self.weights.version
            times["comm"] += time.perf_counter() - t
            return
        if self.allreducer is not None:  # in place, on the device backward wrote it on
            self.allreducer.average_(gradient.grads)
            if self.normalizing and gradient.new_env_steps:
                moments = gradient.moments.to_sums_()
                sum_host_array_(self.allreducer, moments.block(), self.job.device)
                moments.from_sums_()
        times["comm"] += time.perf_counter() - t
        t = time.perf_counter()
        assert self.updater is not None  # not central (returned above): this rank applies
        self.updater.step(gradient)
        self.version = self.updater.version
        times["compute"] += time.perf_counter() - t
        self.layout.add_applied(report, self.updater.last_stats["grad_norm"])

    # -- the loop ----------------------------------------------------------------------------
    def learn_update(self) -> Report:
        """One update's learning: gather its rollouts, compute each gradient step, combine it
        over the workers and apply it; returns this rank's report of the update."""
        cfg = self.job.config
        per_update = cfg.algo.num_steps * self.job.total_envs
        rollouts, t_collect, t_wait = self.source.gather(self.update, self.version)
        progress = (self.env_steps + per_update) / cfg.train.total_env_steps
        report = self.layout.new()
        if starved_learners(self.job, self.source.starved):
            return self._without_update(report, rollouts, t_wait)
        times = {"compute": 0.0, "comm": 0.0}
        lag = float(np.mean([self.version - r.weights_version for r in rollouts]))
        t = time.perf_counter()
        gradients = self.worker.gradients(rollouts, self.update, progress)
        stat_sums, count = np.zeros(len(self.layout.stat_names)), 0
        while True:
            gradient = next(gradients, None)
            times["compute"] += time.perf_counter() - t
            if gradient is None:
                break
            stat_sums += gradient.stats()
            count += 1
            self._step(gradient, times, report)
            t = time.perf_counter()
        self.layout.add_stats(report, stat_sums, count)
        self.layout.fill_update(report, rollouts, lag, t_collect, t_wait, times,
                                self.source.dropped, self.algorithm.learning_rate,
                                self.source.live_collectors)
        self.source.dropped = 0
        return report

    def _without_update(self, report: Report, rollouts: list[Any], t_wait: float) -> Report:
        """The report of an update no learner trained: a learner lost every collector, so
        the job checkpoints and stops (this worker's rollouts are dropped with it)."""
        self.source.dropped += len(rollouts)
        self.layout.fill_update(report, [], 0.0, 0.0, t_wait, {"compute": 0.0, "comm": 0.0},
                                self.source.dropped, self.algorithm.learning_rate,
                                self.source.live_collectors, self.source.starved)
        self.source.dropped = 0
        return report

    def start(self) -> None:
        """Publish the first weights to the rollout source."""
        self.publish()

    def publish(self, command: int = 0) -> None:
        """Hand the rollout source this rank's actor at its version, carrying ``command``
        (closing the source on STOP); the source's weights sync copies what it must."""
        if command & STOP:
            self.source.close(self.actor, self.version, command)
        else:
            self.source.publish(self.actor, self.version, command)

    def end_update(self, control: Control) -> None:
        """Count the update, publish the weights carrying the command (closing the source on
        STOP) and, when asked, write the checkpoint with every learner's collector states."""
        self.update += 1
        self.env_steps = int(control.env_steps)
        command = int(control.command)
        # every learner's collector states, on rank 0 (None elsewhere), when checkpointing
        gathered = (self.job.learners.gather(self.source.states(), root=0)
                    if command & CHECKPOINT else None)
        self.publish(command)
        if gathered is not None and self.leader is not None:
            learner_state = self.updater.state_dict() if self.updater is not None else None
            write_checkpoint(self.job, self.leader, self.actor, learner_state, gathered,
                             self.version, getattr(self.source, "after_update", None))

    def release(self) -> None:
        """After an error in one process: close the envs it collects with itself."""
        if isinstance(self.source, OwnEnvs):
            self.source.envs.close()

    def finish(self) -> None:
        """The leader's final evaluation (rank 0); release the all-reducer."""
        if self.leader is not None:
            self.leader.finish(self.actor)
        if self.allreducer is not None:
            self.allreducer.close()

    def run(self) -> None:
        """Update until STOP (:func:`~hpcrl.learning.loop.run_learner`), agreeing on each
        command with the job's leader."""
        run_learner(self, JobControl(self.job, self.leader))


def starved_learners(job: MpiJob, starved: bool) -> bool:
    """Whether a learner of ``job`` lost every collector (``starved``: this one did), agreed
    by all learner ranks, which then skip the update's gradient steps together (they take
    them in lock step). Only a job that survives lost collectors can starve; elsewhere a
    lost collector ends the job, and nothing is exchanged."""
    return job.survives and any_rank(job.learners, starved)


class JobControl:
    """The decision of a job's learner ranks (:class:`~hpcrl.learning.loop.UpdateControl`):
    every learner's report gathered on rank 0, whose leader records the update and decides;
    the decision broadcast to every learner rank."""

    def __init__(self, job: MpiJob, leader: Leader | None) -> None:
        self.job, self.leader = job, leader

    def decide(self, report: Report) -> Control:
        """Gather the reports on rank 0, record them there and share its decision."""
        rows = gather_rows(self.job.learners, report.data, root=0)
        control = CONTROL_LAYOUT.new()
        if self.leader is not None:
            self.leader.record(rows)
            control = self.leader.control()
        bcast_(self.job.learners, control.data, root=0)
        return control


def write_checkpoint(job: MpiJob, leader: Leader, actor: Any, learner_state: Any,
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


def make_updater(job: MpiJob, resume: dict[str, Any] | None) -> Updater:
    """The updater of a central scheme, with its master actor (restored on resume)."""
    algorithm = job.new_algorithm()
    actor, updater = algorithm.actor, Updater(algorithm)
    if resume is not None:
        actor.load_state_dict(resume["policy"]["state_dict"])
        updater.load_state_dict(resume["placement"]["updater"])
    return updater


class SyncUpdaterRank:
    """The updater of a central synchronous scheme: sums, applies and broadcasts."""

    def __init__(self, job: MpiJob, resume: dict[str, Any] | None, leader: Leader) -> None:
        cfg = job.config
        self.job, self.leader = job, leader
        self.updater = make_updater(job, resume)
        self.algorithm, self.actor = self.updater.algorithm, self.updater.algorithm.actor
        self.layout = ReportLayout(self.algorithm.stat_names)
        self.gradient = Gradient.for_actor(self.actor, len(self.algorithm.stat_names),
                                           job.device)
        self.steps = self.algorithm.steps_per_update(minibatches_per_epoch(cfg))
        self.preempted = False

    def start(self) -> None:
        """Nothing to publish: the workers start from the same weights."""

    def learn_update(self) -> Report:
        """Each gradient step of an update: sum the workers' gradients (their mean applied),
        broadcast the new weights; returns the updater's report (its applied steps)."""
        learners, g = self.job.learners, self.gradient
        n_workers = len(self.job.workers)
        report = self.layout.new()
        if starved_learners(self.job, False):  # the workers skip the update's steps
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
        run_learner(self, JobControl(self.job, self.leader))
