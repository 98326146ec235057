"""Acting on an inference rank: the collector's side.

A collector whose scheme has inference ranks does not evaluate the policy itself: for each
env step and group of its envs it hands its observations, the noise its own per-env
generators drew and, for a recurrent actor, the envs' recurrent state to its inference rank
through that group's slot (:mod:`hpcrl.exchange.acting_slots`: the node's shared window when the
two ranks share a node, messages across nodes), and takes back actions, log-probs, values
and the next state.

The recurrent state stays the collector's: it is reset at episode starts, stored at sequence
starts and checkpointed by the one code path collectors use without inference ranks, so an
inference rank holds nothing a checkpoint needs (for an Atari frame stack the state is a few
percent of the request's bytes).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from hpcrl.comm.channel import Channel
from hpcrl.comm.node_memory import NodeMemory
from hpcrl.exchange.acting_slots import (
    ACT,
    STEP,
    VALUE,
    ActingSpec,
    ClientEnd,
    MessageServerSlot,
    MessageSlot,
    ServerEnd,
    SharedServerSlot,
    SharedSlot,
)
from hpcrl.exchange.protocol import acting_tags
from hpcrl.models.acting import Step

if TYPE_CHECKING:  # annotations only
    from hpcrl.algorithms.family import FamilyWiring


class WiredJob(Protocol):
    """What the acting spec reads of a rank's job: the wiring of its algorithm's family
    (which shapes the spec, reading the rest of the job it is handed)."""

    @property
    def wiring(self) -> FamilyWiring:
        """The wiring of the family of this rank's policy."""


def acting_spec(job: WiredJob, module: Any) -> ActingSpec:
    """The spec of ``module``'s acting in ``job``, as the algorithm family's wiring shapes
    it: built the same way by a collector and its inference rank, so their records match."""
    spec: ActingSpec = job.wiring.acting_spec(job, module)
    return spec


def _slot_words(spec: ActingSpec, envs: int, region: np.ndarray, group: int) -> np.ndarray:
    """Group ``group``'s slot in a collector's ``acting`` region (one slot per group)."""
    words = spec.slot_words(envs)
    flat = region.view(np.float32)
    if flat.size % words:
        raise RuntimeError(f"an acting region of {flat.size} words holds no whole number of "
                           f"slots of {words}: the ranks built different acting specs from "
                           f"one config")
    return flat[group * words:(group + 1) * words]


def client_ends(channel: Channel, server: int, spec: ActingSpec, envs: int, groups: int,
                memory: NodeMemory | None = None, region: np.ndarray | None = None
                ) -> list[ClientEnd]:
    """A collector's end of each group's slot to its inference rank ``server`` (``envs``
    per group): in its ``acting`` region of the node's window when given, else messages."""
    return _ends(SharedSlot, MessageSlot, channel, server, spec, envs, groups, memory, region)


def server_ends(channel: Channel, client: int, spec: ActingSpec, envs: int, groups: int,
                memory: NodeMemory | None = None, region: np.ndarray | None = None
                ) -> list[ServerEnd]:
    """An inference rank's end of each group's slot of collector ``client`` (the ends
    :func:`client_ends` gives that collector)."""
    return _ends(SharedServerSlot, MessageServerSlot, channel, client, spec, envs, groups,
                 memory, region)


def _ends(shared: Any, messages: Any, channel: Channel, peer: int, spec: ActingSpec,
          envs: int, groups: int, memory: NodeMemory | None, region: np.ndarray | None
          ) -> list[Any]:
    """One end of each group's slot with ``peer``: of class ``shared`` over the region
    where there is one, else of class ``messages`` with the group's tags."""
    if region is not None and memory is not None:
        return [shared(spec, envs, _slot_words(spec, envs, region, g), memory.fence)
                for g in range(groups)]
    return [messages(spec, envs, channel, peer, acting_tags(g)) for g in range(groups)]


class RemoteLinks:
    """A collector's slots to its inference rank, one per group, each request carrying the
    weights ``version()`` the collector was told to collect with."""

    def __init__(self, ends: Sequence[ClientEnd], version: Callable[[], int]) -> None:
        self.ends, self.version = list(ends), version

    def post(self, group: int, method: int, count: int) -> ClientEnd:
        """Hand over ``group``'s request (its rows filled by the caller)."""
        end = self.ends[group]
        end.request.set(method=method, version=self.version(), count=count)
        end.post()
        return end

    def close(self) -> None:
        """Tell the inference rank this collector will ask nothing more."""
        for end in self.ends:
            end.request.set(version=self.version())
            end.leave()


class RemoteEngine:
    """A :class:`~hpcrl.models.acting.PolicyEngine` whose forward runs on an inference rank.

    ``sync`` does nothing: the inference rank holds the weights, and serves a request only
    once it has the version the collector was told to collect with."""

    def __init__(self, links: RemoteLinks) -> None:
        self.links = links

    def sync(self) -> None:
        """Nothing to do (see the class docstring)."""
        pass

    def submit(self, group: int, obs: np.ndarray, noise: np.ndarray,
               state: np.ndarray | None = None) -> None:
        """Post ``group``'s STEP request for ``obs`` with ``noise`` (and ``state``)."""
        request = self.links.ends[group].request
        request.obs[...] = obs
        request.noise[...] = noise
        if state is not None:
            request.state[...] = state
        self.links.post(group, STEP, len(obs))

    def result(self, group: int) -> Step:
        """Wait for ``group``'s reply: actions, log-probs, values and the next state (views
        of the reply, valid until the group's next request)."""
        end = self.links.ends[group]
        reply = end.wait()
        stateful = "state" in reply.layout.names
        return reply.actions, reply.log_probs, reply.values, reply.state if stateful else None

    def step(self, obs: np.ndarray, noise: np.ndarray, state: np.ndarray | None = None
             ) -> Step:
        """One STEP through group 0's slot, the answer copied out."""
        self.submit(0, obs, noise, state)
        actions, log_probs, values, new = self.result(0)
        return (actions.copy(), log_probs.copy(), values.copy(),
                None if new is None else new.copy())

    def value(self, obs: np.ndarray, state: np.ndarray | None = None,
              group: int = 0) -> np.ndarray:
        """A VALUE request for the ``len(obs)`` rows through ``group``'s slot; a copy of
        their values."""
        count = len(obs)
        request = self.links.ends[group].request
        request.obs[:count] = obs
        if state is not None:
            request.state[:count] = state
        end = self.links.post(group, VALUE, count)
        return end.wait().values[:count].copy()


class RemotePolicyEngine:
    """An off-policy engine's acting (:mod:`hpcrl.models.acting`) run on an inference rank."""

    def __init__(self, links: RemoteLinks) -> None:
        self.links = links

    def sync(self) -> None:
        """Nothing to do: the inference rank holds the weights."""
        pass

    def submit_act(self, group: int, obs: np.ndarray, noise: np.ndarray | None = None
                   ) -> None:
        """Post ``group``'s ACT request for ``obs`` (with ``noise`` when given)."""
        request = self.links.ends[group].request
        request.obs[...] = obs
        if noise is not None:
            request.noise[...] = noise
        self.links.post(group, ACT, len(obs))

    def act_result(self, group: int) -> np.ndarray:
        """Wait for ``group``'s actions (a view of the reply, valid until its next
        request)."""
        return self.links.ends[group].wait().actions

    def act(self, obs: np.ndarray, noise: np.ndarray | None = None) -> np.ndarray:
        """One ACT request through group 0's slot; a copy of the actions."""
        self.submit_act(0, obs, noise)
        return self.act_result(0).copy()
