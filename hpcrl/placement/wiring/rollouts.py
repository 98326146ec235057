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
from typing import Any

from hpcrl.exchange.acting_slots import ActingSpec, actor_critic_spec
from hpcrl.exchange.remote_acting import RemoteEngine
from hpcrl.placement.wiring.rollout_updates import RolloutUpdates


class RolloutWiring:
    """The rollouts family's :class:`~hpcrl.algorithms.family.FamilyWiring`."""

    def data_path(self, job: Any, resume: dict[str, Any] | None, leader: Any,
                  algorithm: Any, reducer: Any) -> RolloutUpdates:
        """A storage that holds one update's rollouts, read in minibatch epochs."""
        return RolloutUpdates(job, resume, leader, algorithm, reducer)

    def stream_layout(self, job: Any) -> Any:
        """A rollout of one collector's envs."""
        return job.layout()

    def collector(self, job: Any, envs: Any, link: Callable[[Any], Any] | None,
                  incarnation: int) -> tuple[Any, Any]:
        """A collector of whole rollouts acting with its own actor-critic, or through its
        inference rank's ``link``; the actor takes the weights messages."""
        actor = job.new_actor(None if link is not None else job.device)
        engine = RemoteEngine(link(actor)) if link is not None else None
        return job.rollout_collector(envs, actor, engine, incarnation), actor

    def acting_spec(self, job: Any, module: Any) -> ActingSpec:
        """An actor-critic's steps, shaped as the job's rollouts carry them."""
        layout = job.layout()
        return actor_critic_spec(module, layout.obs_shape, layout.obs_dtype,
                                 layout.action_shape)


ROLLOUT_WIRING = RolloutWiring()
