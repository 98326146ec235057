"""The replay family on ranks: chunks of transitions streamed into the replay of one learner
that samples it at the replay ratio (:class:`~hpcrl.placement.wiring.replay_updates.ReplayUpdates`).

Its collectors act with the algorithm's own policy (and explore as its class declares), or
through their inference rank with a :class:`~hpcrl.exchange.remote_acting.RemoteEngine`;
an inference rank answers actions shaped as that exploration says.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from hpcrl.collection.collector import transition_collector
from hpcrl.collection.exploring import EXPLORATIONS
from hpcrl.exchange.acting_slots import ActingSpec, policy_spec
from hpcrl.exchange.remote_acting import RemoteEngine
from hpcrl.placement.wiring.replay_updates import ReplayJob, ReplayUpdates
from hpcrl.scheme import RankRole, collecting_ranks

if TYPE_CHECKING:  # annotations only
    from torch import nn

    from hpcrl.algorithms.capabilities import Capabilities
    from hpcrl.collection.transition_filler import TransitionSections
    from hpcrl.envs.vector import EnvSpaces
    from hpcrl.sections.schema import SchemeConfig


class ChunksJob(Protocol):
    """What the replay family's collector, stream layout and acting spec read of a rank's
    job (its data path reads a :class:`~hpcrl.placement.wiring.replay_updates.ReplayJob`):
    the rank, its role and the job's env counts (where its envs sit), the sections a
    transition collector reads and the ``scheme`` section (how many ranks collect), the
    spaces and the algorithm's capabilities (its exploration), a fresh policy and the
    layout of a chunk."""

    role: RankRole
    spaces: EnvSpaces

    @property
    def rank(self) -> int:
        """This rank in the world."""

    @property
    def scheme(self) -> SchemeConfig:
        """The ``scheme`` section."""

    @property
    def num_envs(self) -> int:
        """The envs of one collecting rank."""

    @property
    def total_envs(self) -> int:
        """The envs of the whole job."""

    @property
    def transition_sections(self) -> TransitionSections:
        """The sections a transition collector reads."""

    @property
    def capabilities(self) -> Capabilities:
        """What the job's algorithm declares (its exploration)."""

    def new_policy(self) -> nn.Module:
        """A fresh acting policy of the job's algorithm."""

    def chunk_layout(self) -> Any:
        """The layout of the chunks a collector rank streams."""


class ChunkWiring:
    """The replay family's :class:`~hpcrl.algorithms.family.FamilyWiring`."""

    def data_path(self, job: ReplayJob, resume: dict[str, Any] | None, leader: Any,
                  algorithm: Any, reducer: Any) -> ReplayUpdates:
        """The replay, read at the replay ratio while the chunks stream in."""
        return ReplayUpdates(job, resume, leader, algorithm, reducer)

    def stream_layout(self, job: ChunksJob) -> Any:
        """A chunk of ``algo.num_steps`` steps of one collector's envs."""
        return job.chunk_layout()

    def collector(self, job: ChunksJob, envs: Any, link: Callable[[Any], Any] | None,
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

    def acting_spec(self, job: ChunksJob, module: Any) -> ActingSpec:
        """An off-policy policy's actions, shaped as its algorithm's declared exploration
        says (env indices or vectors, and whether the policy acts with noise)."""
        fmt = job.spaces.obs_format
        exploring = EXPLORATIONS[job.capabilities.exploration]
        discrete = exploring.integer_actions
        return policy_spec(fmt.shape, fmt.dtype, discrete, exploring.noisy_policy,
                           0 if discrete else int(np.prod(job.spaces.action_shape)))


CHUNK_WIRING = ChunkWiring()
