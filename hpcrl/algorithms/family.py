"""An algorithm's family, declared once: what feeds its learner and what its collectors send.

Learning from rollouts and learning from a replay differ in one bundle of things: the
learner's data path, what a collector fills and streams (its unit), the layout of that
stream, what an inference rank answers when it acts for the collectors, the plan's line
about the agent, and hooks such as demonstrations. An algorithm class declares its family
as one :class:`Family` (``family`` on the class: :data:`ROLLOUTS` on the on-policy base,
:data:`REPLAY` on the off-policy one); generic code asks that object and never looks the
family up in a table or branches on it.

The declaration is torch-free data (config checks and ``hpcrl plan`` read it before any rank
starts). What a family's learner and collectors run on ranks is its *wiring*
(:class:`FamilyWiring`), named by import path in :attr:`Family.wiring` and resolved when a
job is assembled, the way every plug-in is: a family's wiring runs on the placement's
machinery (ranks, streams, weights), which this layer does not import. A new family, a
plug-in's included, is one module holding its wiring and its declaration, named by the
algorithm class that declares it (``examples/evolution_strategies.py``).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from hpcrl.sections.offpolicy import ReplayConfig
from hpcrl.sections.schema import AlgoConfig, EnvConfig, SchemeConfig


class FamilyWiring(Protocol):
    """What a family runs on ranks (one object per family; every method takes the job of
    the rank that asks, a :class:`~hpcrl.placement.job.RankJob`):

    - :meth:`data_path`: the learner's updates (what feeds its algorithm, how its weights
      go out, how it checkpoints what it learns from);
    - :meth:`stream_layout`: the layout of the unit a collector rank streams to its learner;
    - :meth:`collector`: a collector rank's collector of its envs, acting with the family's
      policy or through its inference rank's link;
    - :meth:`acting_spec`: the request and reply an inference rank serves for it.
    """

    def data_path(self, job: Any, resume: dict[str, Any] | None, leader: Any,
                  algorithm: Any, reducer: Any) -> Any:
        """The learner rank's data path (its ``start``, ``learn_update``, ``end_update``,
        ``control``, ``release``, ``finish``)."""
        ...

    def stream_layout(self, job: Any) -> Any:
        """The layout of one unit a collector rank streams to its learner."""
        ...

    def collector(self, job: Any, envs: Any, link: Callable[[Any], Any] | None,
                  incarnation: int) -> tuple[Any, Any]:
        """A collector rank's collector of ``envs`` and the module whose weights messages it
        takes (``link(module)``: the slots to its inference rank, where one acts for it;
        ``incarnation`` > 0 for a spare in a lost collector's place)."""
        ...

    def acting_spec(self, job: Any, module: Any) -> Any:
        """The spec of ``module``'s acting requests and replies (built alike by a collector
        and its inference rank)."""
        ...


@dataclass(frozen=True)
class AgentSections:
    """The sections of a config that the plan's line about an agent reads (``hpcrl plan``
    hands them to its family's summary)."""

    algo: AlgoConfig
    scheme: SchemeConfig
    replay: ReplayConfig
    env: EnvConfig


@dataclass(frozen=True)
class Family:
    """An algorithm family: its ``name``, the ``unit`` its collectors send (one word used
    everywhere: in the lines about collectors, and for a plug-in's own), the plan's
    ``summary`` of an agent of it (``summary(sections, algorithm_class)``, over
    :class:`AgentSections`), and its
    ``wiring`` (``"module:Name"`` of its :class:`FamilyWiring`)."""

    name: str
    unit: str
    summary: Callable[[AgentSections, Any], str]
    wiring: str


def rollouts_summary(sections: AgentSections, cls: Any) -> str:
    """An on-policy agent in words: the algorithm, its V-trace targets, the policy lag it
    drops asynchronous rollouts at."""
    scheme = sections.scheme
    vtrace = " with V-trace targets" if cls.capabilities.storage == "vtrace" else ""
    lag = (f", rollouts more than {scheme.max_policy_lag} updates old dropped"
           if scheme.collection == "async" else "")
    return f"{sections.algo.name}{vtrace}{lag}"


def replay_summary(sections: AgentSections, cls: Any) -> str:
    """An off-policy agent in words: the algorithm, its replay and its priorities, n-step
    returns and per-collector epsilon."""
    a, r = sections.algo, sections.replay
    own = getattr(a, cls.section_name(), None)
    replay = "prioritised replay" if r.prioritized else "uniform replay"
    if r.prioritized:
        replay += (" (priorities from the collectors)" if cls.collector_priorities(own)
                   else " (new transitions at the max priority)")
    parts = [a.name, f"{replay} of {r.buffer_size:,}"]
    if r.n_step > 1:
        parts.append(f"{r.n_step}-step returns")
    eps = cls.epsilon_keys(own)
    if eps is not None and eps.per_collector_eps:
        parts.append("per-collector epsilon")
    return ", ".join(parts)


ROLLOUTS = Family("rollouts", "rollout", rollouts_summary,
                  "hpcrl.placement.wiring.rollouts:ROLLOUT_WIRING")
"""Learns from rollouts: each update trains on the rollouts just collected (PPO, A2C,
IMPALA): a storage that holds one update, read in minibatch epochs."""

REPLAY = Family("replay", "chunk", replay_summary,
                "hpcrl.placement.wiring.replay:CHUNK_WIRING")
"""Learns from a replay: collectors stream chunks of transitions into a replay that one
learner samples at the replay ratio (DQN, DDPG, TD3, SAC, MPO, MPC)."""
