"""Serial placement: the synchronous learner loop of the MPI placement, in one process.

A serial run is a job of one rank: a gradient worker that collects with its own envs, over
a communicator of size one (:class:`~hpcrl.comm.world.SelfComm`, whose collectives return
at once and never touch MPI). It runs :meth:`WorkerRank.learn_update
<hpcrl.placement.mpi.learners.WorkerRank.learn_update>`, the code every synchronous MPI gradient
worker runs, with one actor that collects, computes gradients and is updated in place (no
weights are copied between roles), and it reports its figures through the same
:class:`~hpcrl.roles.protocol.ReportLayout`, so ``progress.csv`` means the same in
both. It is the default for a workstation run, the debugging path, and the reference the
MPI placements are tested against.
"""
from __future__ import annotations

from typing import Any

from hpcrl.comm.world import SelfComm
from hpcrl.config.schema import Config
from hpcrl.core.actor import ActorCritic
from hpcrl.core.envs import EnvSpaces
from hpcrl.placement.mpi.job import MpiJob
from hpcrl.placement.mpi.learners import WorkerRank
from hpcrl.roles.protocol import Report, ReportLayout
from hpcrl.roles.updater import Updater
from hpcrl.runtime.devices import pick_device
from hpcrl.scheme import assign_roles


def local_job(config: Config, spaces: EnvSpaces) -> MpiJob:
    """The job of a one-process run: one gradient worker with its own envs, on
    ``train.device``, whose communicators hold only this process."""
    comm = SelfComm()
    table = assign_roles(1, config.scheme, config.env.num_envs)
    device = pick_device(config.train.device, None)
    return MpiJob(config, comm, table[0], table, comm, comm, device, spaces)


class SerialPlacement:
    """One gradient worker that collects, computes and applies every gradient itself."""

    def __init__(self, config: Config, spaces: EnvSpaces) -> None:
        self.config = config
        self.learner = WorkerRank(local_job(config, spaces), None, None)
        self._publish()

    def _publish(self) -> None:
        """The collector acts with the learner's own actor: its new version, no copy."""
        self.learner.publish()

    @property
    def master_actor(self) -> ActorCritic:
        """The one actor of the run (what checkpoints save)."""
        return self.learner.actor

    @property
    def stat_names(self) -> tuple[str, ...]:
        """The loss terms of the progress rows."""
        return self.learner.algorithm.stat_names

    @property
    def layout(self) -> ReportLayout:
        """The layout of the update reports (:meth:`run_update`'s)."""
        return self.learner.layout

    def run_update(self, update: int, env_steps: int) -> Report:
        """Collect one rollout, compute and apply every gradient of the update (the run's
        ``update``-th, after ``env_steps`` env steps); returns the update's report."""
        learner = self.learner
        learner.update, learner.env_steps = update, env_steps
        report = learner.learn_update()
        self._publish()
        return report

    def _updater(self) -> Updater:
        """The learner's own updater (one process updates itself: never a central one)."""
        updater = self.learner.updater
        assert updater is not None, "a serial learner applies its own gradients"
        return updater

    def state_dict(self) -> dict[str, Any]:
        """The updater's state and the collector's, for a checkpoint."""
        return {"updater": self._updater().state_dict(),
                "collectors": self.learner.source.states()}

    def load_state_dict(self, state: dict[str, Any], actor_state: dict[str, Any]) -> list[str]:
        """Restore the roles; returns env attributes that could not be restored exactly."""
        learner = self.learner
        learner.actor.load_state_dict(actor_state)
        self._updater().load_state_dict(state["updater"])
        learner.version = self._updater().version
        (collector_state,) = state["collectors"]
        inexact = learner.source.collector.load_state_dict(collector_state)
        self._publish()
        return inexact

    def close(self) -> None:
        """Close the rollout source (its envs), handing it the current weights."""
        learner = self.learner
        learner.source.close(learner.actor, learner.version, 0)
