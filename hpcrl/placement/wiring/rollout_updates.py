"""An on-policy learner rank's updates: one update's rollouts, read in minibatch epochs.

The data path of an algorithm that learns from rollouts (the families' other one is
:class:`~hpcrl.placement.wiring.replay_updates.ReplayUpdates`). Per update:

1. the update's rollouts come from the rank's own envs or its collectors (its rollout
   source: :class:`~hpcrl.placement.wiring.rollout_source.OwnEnvs`, ``SyncCollectors``,
   ``AsyncCollectors``) into a storage that holds one update (GAE or V-trace);
2. the gradient worker (:class:`~hpcrl.learning.gradient_worker.GradientWorker`) reads it in
   the algorithm's minibatch epochs, one gradient per minibatch;
3. each gradient takes the scheme's route (:mod:`~hpcrl.placement.wiring.gradient_routes`):
   averaged and applied here, summed onto a central updater, or sent to an asynchronous one;
4. the update's decision is the route's (rank 0's leader, or the asynchronous updater), and
   the new weights carrying it go out to the rollout source.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from hpcrl.algorithms.on_policy import OnPolicyAlgorithm
from hpcrl.exchange.protocol import STOP, Control, Report, ReportLayout
from hpcrl.learning.gradient_worker import GradientWorker
from hpcrl.learning.loop import UpdateControl
from hpcrl.numerics.reducer import ReducerSlot
from hpcrl.placement.leader import Leader
from hpcrl.placement.ranks.job_control import collector_state_for
from hpcrl.placement.wiring.gradient_routes import GradientRoute, RouteJob, route_for
from hpcrl.placement.wiring.rollout_source import (
    AsyncCollectors,
    OwnEnvs,
    SourceJob,
    SyncCollectors,
)

if TYPE_CHECKING:  # annotations only
    from hpcrl.sections.schema import TrainConfig


class RolloutJob(RouteJob, SourceJob, Protocol):
    """What the rollouts family's data path reads of a gradient worker's job: what its
    gradient route and rollout source read
    (:class:`~hpcrl.placement.wiring.gradient_routes.RouteJob`,
    :class:`~hpcrl.placement.wiring.rollout_source.SourceJob`), the storage of an update's
    rollouts, the ``train`` section (the budget), the seed and the counts of an update."""

    @property
    def train(self) -> TrainConfig:
        """The ``train`` section (``total_env_steps``)."""

    @property
    def seed(self) -> int:
        """The run's seed (minibatch orders)."""

    @property
    def total_envs(self) -> int:
        """The envs of the whole job."""

    @property
    def steps_per_update(self) -> int:
        """Env steps of the whole job in one update."""

    @property
    def minibatches_per_epoch(self) -> int:
        """The minibatches each epoch over an update cuts."""

    def new_storage(self) -> Any:
        """A gradient worker's rollout storage on this rank's device."""


def rollout_source(job: SourceJob, resume: dict[str, Any] | None,
                   shared: Any = None) -> OwnEnvs | SyncCollectors | AsyncCollectors:
    """Where a gradient worker's rollouts come from: its own envs (acting with ``shared``,
    the learner's very actor, where given), or its collectors, synchronous or not
    (``scheme.collection``)."""
    if job.role.collects:
        return OwnEnvs(job, collector_state_for(resume, job.role.env_offset), shared)
    if job.scheme.collection == "async":
        return AsyncCollectors(job)
    return SyncCollectors(job)


class RolloutUpdates:
    """A gradient worker's updates on the rollouts of each update (see the module)."""

    def __init__(self, job: RolloutJob, resume: dict[str, Any] | None, leader: Leader | None,
                 algorithm: OnPolicyAlgorithm, reducer: ReducerSlot) -> None:
        self.job, self.algorithm = job, algorithm
        self.route: GradientRoute = route_for(job, algorithm, leader)
        route = self.route
        reducer.bind(route.statistics_reducer())
        self.actor = algorithm.actor
        self.worker = GradientWorker(algorithm, job.new_storage(), job.seed, job.total_envs,
                                     job.minibatches_per_epoch)
        self.version = 0
        if resume is not None:
            self.actor.load_state_dict(resume["policy"]["state_dict"])
            self.version = int(resume["placement"]["updater"]["version"])
            route.load_state_dict(resume["placement"]["updater"])
        # on the CPU, its own collector acts with this very actor where the route allows
        shared = self.actor if job.device.type == "cpu" and route.shares_actor else None
        self.source = rollout_source(job, resume, shared)
        self.layout = ReportLayout(algorithm.stat_names)
        counters = resume["counters"] if resume is not None else {"updates": 0, "env_steps": 0}
        self.update = int(counters["updates"]) if route.resumes_update_count else 0
        self.env_steps = int(counters["env_steps"])
        self.per_update = job.steps_per_update  # env steps of a job's update
        self.learnt_steps = 0  # env steps the update just learnt from (0: it was skipped)

    def control(self) -> UpdateControl:
        """Who decides after each update: the route's decider."""
        return self.route.control(self)

    def start(self) -> None:
        """Publish the first weights to the rollout source."""
        self.publish()

    def learn_update(self) -> Report:
        """One update's learning: gather its rollouts, compute each gradient step and send it
        along the route; returns this rank's report of the update."""
        route = self.route
        route.command = 0
        rollouts, t_collect, t_wait = self.source.gather(self.update, self.version)
        progress = (self.env_steps + self.per_update) / self.job.train.total_env_steps
        report = self.layout.new()
        times = {"compute": 0.0, "comm": 0.0}
        self.learnt_steps = 0
        if route.starved(self.source.starved, self.worker.message, times,
                         self.source.env_failures):
            return self._without_update(report, rollouts, t_wait, times)
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
            self.version = route.step(gradient, self.worker, times, report, self.layout)
            if route.command & STOP:  # the asynchronous updater's budget is spent
                gradients.close()
                break
            t = time.perf_counter()
        self.learnt_steps = self.per_update
        self.layout.add_stats(report, stat_sums, count)
        self.layout.fill_update(report, rollouts, lag, t_collect, t_wait, times,
                                self.source.dropped, self.algorithm.learning_rate,
                                self.source.live_collectors)
        self.source.dropped = 0
        return report

    def _without_update(self, report: Report, rollouts: list[Any], t_wait: float,
                        times: dict[str, float]) -> Report:
        """The report of an update no learner trained: a learner lost every collector, or
        an env failed for good, so the job checkpoints and stops (this worker's rollouts are
        dropped with it)."""
        self.source.dropped += len(rollouts)
        self.layout.fill_update(report, [], 0.0, 0.0, t_wait, times, self.source.dropped,
                                self.algorithm.learning_rate, self.source.live_collectors,
                                self.source.starved and not self.source.env_failures,
                                self.source.env_failures)
        self.source.dropped = 0
        return report

    def publish(self, command: int = 0) -> None:
        """Hand the rollout source this rank's actor at its version, carrying ``command``
        (closing the source on STOP); the source's weights sync copies what it must."""
        if command & STOP:
            self.source.close(self.actor, self.version, command)
        else:
            self.source.publish(self.actor, self.version, command)

    def end_update(self, control: Control) -> None:
        """Count the update and act on the decision: publish the weights carrying its
        command, with the checkpoint's states where it asks for one (the route's way)."""
        self.update += 1
        self.env_steps = int(control.env_steps)
        self.route.checkpoint(self, int(control.command), self.publish)

    def release(self) -> None:
        """After an error in one process: close the envs it collects with itself."""
        if isinstance(self.source, OwnEnvs):
            self.source.envs.close()

    def finish(self) -> None:
        """Release what the route opened."""
        self.route.finish()
