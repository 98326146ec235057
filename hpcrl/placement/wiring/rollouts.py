"""The rollouts family on ranks: whole rollouts streamed to a learner that trains on each
update's rollouts in minibatch epochs
(:class:`~hpcrl.placement.wiring.rollout_updates.RolloutUpdates`).

Its collectors act with the job's actor-critic, or through their inference rank with a
:class:`~hpcrl.exchange.remote_acting.RemoteEngine` (the actor then only holds the
normalisers); an inference rank answers an actor-critic's steps shaped as the rollouts
carry them.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from hpcrl.exchange.acting_slots import ActingSpec, actor_critic_spec
from hpcrl.exchange.remote_acting import RemoteEngine
from hpcrl.placement.wiring.rollout_updates import RolloutJob, RolloutUpdates

if TYPE_CHECKING:  # annotations only
    import torch

    from hpcrl.buffers.rollout import RolloutLayout
    from hpcrl.collection.collector import Collector
    from hpcrl.models.actor import ActorCritic


class RolloutsJob(Protocol):
    """What the rollouts family's collector, stream layout and acting spec read of a
    rank's job (its data path reads a
    :class:`~hpcrl.placement.wiring.rollout_updates.RolloutJob`): the rollout layout, a
    fresh actor on the rank's device, and the collector of its envs."""

    device: torch.device

    def layout(self) -> RolloutLayout:
        """The rollout layout of one collector's envs."""

    def new_actor(self, device: torch.device | None = None) -> ActorCritic:
        """A freshly built actor of the job's config on ``device``."""

    def rollout_collector(self, envs: Any, actor: ActorCritic, engine: Any = None,
                          incarnation: int = 0) -> Collector[Any]:
        """The rollout collector of ``envs`` acting with ``actor`` (or ``engine``)."""


class RolloutWiring:
    """The rollouts family's :class:`~hpcrl.algorithms.family.FamilyWiring`."""

    def data_path(self, job: RolloutJob, resume: dict[str, Any] | None, leader: Any,
                  algorithm: Any, reducer: Any) -> RolloutUpdates:
        """A storage that holds one update's rollouts, read in minibatch epochs."""
        return RolloutUpdates(job, resume, leader, algorithm, reducer)

    def stream_layout(self, job: RolloutsJob) -> Any:
        """A rollout of one collector's envs."""
        return job.layout()

    def collector(self, job: RolloutsJob, envs: Any, link: Callable[[Any], Any] | None,
                  incarnation: int) -> tuple[Any, Any]:
        """A collector of whole rollouts acting with its own actor-critic, or through its
        inference rank's ``link``; the actor takes the weights messages."""
        actor = job.new_actor(None if link is not None else job.device)
        engine = RemoteEngine(link(actor)) if link is not None else None
        return job.rollout_collector(envs, actor, engine, incarnation), actor

    def acting_spec(self, job: RolloutsJob, module: Any) -> ActingSpec:
        """An actor-critic's steps, shaped as the job's rollouts carry them."""
        layout = job.layout()
        return actor_critic_spec(module, layout.obs_shape, layout.obs_dtype,
                                 layout.action_shape)


ROLLOUT_WIRING = RolloutWiring()
