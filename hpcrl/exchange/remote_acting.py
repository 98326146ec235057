"""Acting on an inference rank: the collector's side.

A collector whose scheme has inference ranks does not evaluate the policy itself: for each
env step and group of its envs it hands its observations, the noise its own per-env
generators drew and, for a recurrent actor, the envs' recurrent state to its inference rank
through that group's slot (:mod:`hpcrl.exchange.acting_slots`: the node's shared window when the
two ranks share a node, messages across nodes), and takes back the step: actions, and the
log-probs, values and next state where the policy has them. One :class:`RemoteEngine`
serves every policy, as :class:`~hpcrl.models.acting.Engine` says.

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
    """An :class:`~hpcrl.models.acting.Engine` whose forward runs on an inference rank: its
    steps hold what the reply's layout holds (an actor-critic's log-probs, values and next
    state; a policy's actions alone), and :meth:`value` answers where the served policy
    gives values (:class:`~hpcrl.models.acting.ValueEngine`).

    ``sync`` does nothing: the inference rank holds the weights, and serves a request only
    once it has the version the collector was told to collect with. What the engine carries
    between steps is the collector's (its recurrent state): nothing to reset or checkpoint
    here."""

    def __init__(self, links: RemoteLinks) -> None:
        self.links = links
        names = links.ends[0].reply.layout.names if links.ends else ()
        self._scored = "values" in names  # the reply holds log-probs and values
        self._stateful = "state" in names

    def sync(self) -> None:
        """Nothing to do (see the class docstring)."""
        pass

    def submit(self, group: int, obs: np.ndarray, noise: np.ndarray | None = None,
               state: np.ndarray | None = None) -> None:
        """Post ``group``'s STEP request for ``obs`` (with ``noise`` and ``state`` where
        given)."""
        request = self.links.ends[group].request
        request.obs[...] = obs
        if noise is not None:
            request.noise[...] = noise
        if state is not None:
            request.state[...] = state
        self.links.post(group, STEP, len(obs))

    def result(self, group: int) -> Step:
        """Wait for ``group``'s reply: its step (views of the reply, valid until the group's
        next request)."""
        reply = self.links.ends[group].wait()
        if not self._scored:
            return Step(reply.actions, state=reply.state if self._stateful else None)
        return Step(reply.actions, reply.log_probs, reply.values,
                    reply.state if self._stateful else None)

    def step(self, obs: np.ndarray, noise: np.ndarray | None = None,
             state: np.ndarray | None = None) -> Step:
        """One STEP through group 0's slot, the answer copied out."""
        self.submit(0, obs, noise, state)
        actions, log_probs, values, new = self.result(0)
        return Step(actions.copy(), None if log_probs is None else log_probs.copy(),
                    None if values is None else values.copy(), None if new is None else new.copy())

    def value(self, obs: np.ndarray, state: np.ndarray | None = None,
              group: int = 0) -> np.ndarray:
        """A VALUE request for the ``len(obs)`` rows through ``group``'s slot; a copy of
        their values (a policy that gives values: the reply holds them)."""
        count = len(obs)
        request = self.links.ends[group].request
        request.obs[:count] = obs
        if state is not None:
            request.state[:count] = state
        end = self.links.post(group, VALUE, count)
        return end.wait().values[:count].copy()

    def reset(self, done: np.ndarray, cols: slice = slice(None)) -> None:
        """Nothing carried here (see the class docstring)."""

    def state_dict(self) -> dict[str, Any]:
        """``{}``: nothing carried here."""
        return {}

    def load_state_dict(self, state: dict[str, Any], envs_restored: bool = True) -> None:
        """Nothing to restore."""
