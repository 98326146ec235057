"""The replay family on ranks: chunks of transitions streamed into the replay of one learner
that samples it at the replay ratio (:class:`~hpcrl.placement.wiring.replay_updates.ReplayUpdates`).

Its collectors act with the algorithm's own policy (and explore as its class declares), or
through their inference rank with a :class:`~hpcrl.exchange.remote_acting.RemoteEngine`;
an inference rank answers actions shaped as that exploration says.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from hpcrl.collection.collector import transition_collector
from hpcrl.collection.exploring import EXPLORATIONS
from hpcrl.exchange.acting_slots import ActingSpec, policy_spec
from hpcrl.exchange.remote_acting import RemoteEngine
from hpcrl.placement.wiring.replay_updates import ReplayUpdates
from hpcrl.scheme import collecting_ranks


class ChunkWiring:
    """The replay family's :class:`~hpcrl.algorithms.family.FamilyWiring`."""

    def data_path(self, job: Any, resume: dict[str, Any] | None, leader: Any,
                  algorithm: Any, reducer: Any) -> ReplayUpdates:
        """The replay, read at the replay ratio while the chunks stream in."""
        return ReplayUpdates(job, resume, leader, algorithm, reducer)

    def stream_layout(self, job: Any) -> Any:
        """A chunk of ``algo.num_steps`` steps of one collector's envs."""
        return job.chunk_layout()

    def collector(self, job: Any, envs: Any, link: Callable[[Any], Any] | None,
                  incarnation: int) -> tuple[Any, Any]:
        """A collector of transition chunks of ``algo.num_steps`` steps per env, acting with
        the algorithm's policy or through its inference rank's ``link``; the policy takes
        the weights messages."""
        policy = job.new_policy()
        acting = RemoteEngine(link(policy)) if link is not None else None
        offset = job.role.env_offset
        collector = transition_collector(envs, policy, job.transition_sections, offset, job.rank,
                                         job.total_envs, offset // job.num_envs,
                                         collecting_ranks(job.scheme), acting, incarnation)
        return collector, policy

    def acting_spec(self, job: Any, module: Any) -> ActingSpec:
        """An off-policy policy's actions, shaped as its algorithm's declared exploration
        says (env indices or vectors, and whether the policy acts with noise)."""
        fmt = job.spaces.obs_format
        exploring = EXPLORATIONS[job.capabilities.exploration]
        discrete = exploring.integer_actions
        return policy_spec(fmt.shape, fmt.dtype, discrete, exploring.noisy_policy,
                           0 if discrete else int(np.prod(job.spaces.action_space.shape)))


CHUNK_WIRING = ChunkWiring()
