"""Acting on an inference rank: the messages, and the collector's side of them.

A collector whose scheme has inference ranks does not evaluate the policy itself: each env
step it sends its observations (in their own dtype: Atari's uint8 frames stay uint8), the
noise its own per-env generators drew for the step and, for a recurrent actor, the envs'
recurrent state to its inference rank, which batches the requests of its collectors into one
forward and sends back actions, log-probs, values and the next state.

The noise travels with the request, so a sampled action depends only on the collector's
streams and the weights, never on where the sampling ran or which requests were batched
together: a synchronous job with inference ranks reaches the weights of the same job acting
on its collectors. The recurrent state travels too, and stays the collector's: it is reset at
episode starts, stored at sequence starts and checkpointed by the one code path collectors
use without inference ranks, so an inference rank holds nothing a checkpoint needs (for an
Atari frame stack the state is a few percent of the request's bytes).

Every message is one fixed-size named-field record (:mod:`hpcrl.core.records`) sized for the
collector's ``env.num_envs`` envs; ``count`` says how many rows a value request fills.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from hpcrl.comm import Poll
from hpcrl.comm.channel import Channel
from hpcrl.comm.node_memory import NodeMemory
from hpcrl.core.actor import ActorCritic
from hpcrl.core.records import Record, RecordLayout
from hpcrl.roles.protocol import TAG_ACT, TAG_ACTED

STEP, VALUE, ACT, BYE = 1, 2, 3, 4  # what a request asks for (BYE: the collector has left)

# A collector waits for its actions every env step: poll briefly first, so the round trip
# costs tens of microseconds, not a back-off of milliseconds.
REPLY_POLL = Poll(initial_s=5e-6, max_s=2e-4, growth=1.5)


class ActRequest(Record):
    """A collector's request to its inference rank (:meth:`ActingSpec.request_layout`): its
    fields, declared for the type checker (views of the record's buffer, ``[envs, ...]`` per
    env). ``noise`` exists only when the policy draws noise, ``state`` only for a recurrent
    actor."""

    method: np.ndarray  # int64 scalar: STEP, VALUE, ACT or BYE
    version: np.ndarray  # int64 scalar: the weights version the collector needs
    count: np.ndarray  # int64 scalar: rows a VALUE request fills
    obs: np.ndarray
    noise: np.ndarray
    state: np.ndarray


class ActReply(Record):
    """An inference rank's reply (:meth:`ActingSpec.reply_layout`): its fields, declared for
    the type checker. ``log_probs`` and ``values`` exist only for an actor-critic, ``state``
    only for a recurrent actor."""

    version: np.ndarray  # int64 scalar: the weights version that acted
    actions: np.ndarray
    log_probs: np.ndarray
    values: np.ndarray
    state: np.ndarray


@dataclass(frozen=True)
class ActingSpec:
    """The shapes and dtypes of one env's part of a request and of its reply.

    ``obs``: the observation as the collector carries it; ``noise``: the per-env noise of a
    step (None when the policy draws none); ``state``: the recurrent state size (0: none);
    ``action``: the shape and dtype of one env's action; ``on_policy``: the reply holds
    log-probs and values (an actor-critic's step) or actions alone (an off-policy policy).
    """

    obs_shape: tuple[int, ...]
    obs_dtype: str
    noise_shape: tuple[int, ...] | None
    state_size: int
    action_shape: tuple[int, ...]
    action_dtype: str
    on_policy: bool

    def request_layout(self, envs: int) -> RecordLayout[ActRequest]:
        """The record a collector of ``envs`` envs sends: method, version, count, observations,
        and the noise and recurrent state when there are any."""
        fields: list[Any] = [("method", (), np.int64), ("version", (), np.int64),
                             ("count", (), np.int64),
                             ("obs", (envs,) + self.obs_shape, np.dtype(self.obs_dtype))]
        if self.noise_shape is not None:
            fields.append(("noise", (envs,) + self.noise_shape, np.float32))
        if self.state_size:
            fields.append(("state", (envs, self.state_size), np.float32))
        return RecordLayout(fields, record_type=ActRequest)

    def reply_layout(self, envs: int) -> RecordLayout[ActReply]:
        """The record an inference rank answers with: version and actions, log-probs and values
        for an actor-critic, and the next recurrent state when there is one."""
        fields: list[Any] = [("version", (), np.int64),
                             ("actions", (envs,) + self.action_shape,
                              np.dtype(self.action_dtype))]
        if self.on_policy:
            fields += [("log_probs", (envs,), np.float32), ("values", (envs,), np.float32)]
        if self.state_size:
            fields.append(("state", (envs, self.state_size), np.float32))
        return RecordLayout(fields, record_type=ActReply)


def actor_critic_spec(actor: Any, obs_shape: tuple[int, ...], obs_dtype: str,
                      action_shape: tuple[int, ...]) -> ActingSpec:
    """The spec of an actor-critic's steps (:class:`~hpcrl.core.actor.ActorCritic`)."""
    return ActingSpec(tuple(obs_shape), str(np.dtype(obs_dtype)),
                      tuple(actor.distribution.noise_shape()),
                      actor.state_size if actor.recurrent else 0, tuple(action_shape),
                      "int64" if actor.integer_actions else "float32", on_policy=True)


def policy_spec(obs_shape: tuple[int, ...], obs_dtype: str, discrete: bool, sampling: bool,
                action_dim: int) -> ActingSpec:
    """The spec of an off-policy policy's actions (greedy Q, deterministic or squashed
    Gaussian; only the last draws noise, one normal per action dimension)."""
    return ActingSpec(tuple(obs_shape), str(np.dtype(obs_dtype)),
                      (action_dim,) if sampling else None, 0,
                      () if discrete else (action_dim,), "int64" if discrete else "float32",
                      on_policy=False)


def acting_spec(job: Any, module: Any) -> ActingSpec:
    """The spec of ``module``'s acting in ``job`` (an :class:`~hpcrl.placement.mpi.job.MpiJob`):
    built the same way by a collector and its inference rank, so their buffers match."""
    from hpcrl.core.policies import SquashedGaussianPolicy
    from hpcrl.core.qnetwork import QNetwork

    if isinstance(module, ActorCritic):
        layout = job.layout()
        return actor_critic_spec(module, layout.obs_shape, layout.obs_dtype,
                                 layout.action_shape)
    fmt = job.spaces.obs_format
    discrete = isinstance(module, QNetwork)
    return policy_spec(fmt.shape, fmt.dtype, discrete,
                       isinstance(module, SquashedGaussianPolicy),
                       0 if discrete else int(np.prod(job.spaces.action_space.shape)))


def acting_records(spec: ActingSpec, envs: int, region: np.ndarray | None
                   ) -> tuple[ActRequest, ActReply]:
    """A collector's request and reply records: in buffers of their own, or one after the
    other in its ``acting`` region of the node's window (the inference rank maps the same)."""
    request_layout, reply_layout = spec.request_layout(envs), spec.reply_layout(envs)
    if region is None:
        return request_layout.new(), reply_layout.new()
    a, b = request_layout.words, reply_layout.words
    if region.nbytes != (a + b) * 4:
        raise RuntimeError(f"an acting region holds {region.nbytes} bytes where this rank's "
                           f"records need {(a + b) * 4}: the ranks built different acting "
                           f"specs from one config")
    words = region.view(np.float32)
    return request_layout.wrap(words[:a]), reply_layout.wrap(words[a:a + b])


class Carrier:
    """How a record crosses between a collector and its inference rank (``peer``): its
    bytes as a message, or, when it lies in the node's window (``memory`` given), a one-word
    notice that the other side may read it now."""

    def __init__(self, channel: Channel, peer: int, memory: NodeMemory | None) -> None:
        self.channel, self.peer, self.memory = channel, peer, memory
        self.notice_out = np.zeros(1, np.int64)
        self.notice_in = np.zeros(1, np.int64)

    def send(self, record: Record, tag: int) -> Any:
        """Start handing ``record`` over (the request to wait for)."""
        if self.memory is None:
            return self.channel.isend(record.data, self.peer, tag)
        self.memory.fence()  # the record is in the window before the notice says so
        return self.channel.isend(self.notice_out, self.peer, tag)

    def receive(self, record: Record, tag: int) -> Any:
        """Start taking ``record`` over (the request to wait for; then :meth:`arrived`)."""
        return self.channel.irecv(record.data if self.memory is None else self.notice_in,
                                  self.peer, tag)

    def arrived(self) -> None:
        """After the receive completed: the other side's stores to the record are seen."""
        if self.memory is not None:
            self.memory.fence()


class RemoteLink:
    """A collector's request/reply pair of records to its inference rank, in its own
    buffers or (``memory`` and ``region`` given: the rank's ``acting`` region) in shared
    memory."""

    def __init__(self, channel: Channel, server: int, spec: ActingSpec, envs: int,
                 version: Callable[[], int], memory: NodeMemory | None = None,
                 region: np.ndarray | None = None) -> None:
        self.channel, self.server, self.version = channel, server, version
        self.request, self.reply = acting_records(spec, envs, region)
        self.carrier = Carrier(channel, server, memory if region is not None else None)
        self.envs = envs

    def call(self, method: int, count: int) -> ActReply:
        """Send the request (its fields filled by the caller) and wait for the reply."""
        self.request.set(method=method, version=self.version(), count=count)
        reply = self.carrier.receive(self.reply, TAG_ACTED)
        self.channel.wait(self.carrier.send(self.request, TAG_ACT), REPLY_POLL)
        self.channel.wait(reply, REPLY_POLL)
        self.carrier.arrived()
        return self.reply

    def close(self) -> None:
        """Tell the inference rank this collector will ask nothing more."""
        self.request.set(method=BYE, version=self.version(), count=0)
        self.channel.wait(self.carrier.send(self.request, TAG_ACT))


class RemoteEngine:
    """A :class:`~hpcrl.core.acting.PolicyEngine` whose forward runs on an inference rank.

    ``sync`` does nothing: the inference rank holds the weights, and serves a request only
    once it has the version the collector was told to collect with."""

    def __init__(self, link: RemoteLink) -> None:
        self.link = link

    def sync(self) -> None:
        """Nothing to do (see the class docstring)."""
        pass

    def step(self, obs: np.ndarray, noise: np.ndarray, state: np.ndarray | None = None
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        """Send a STEP request for ``obs`` with ``noise`` (and ``state``) and return copies of the
        reply's actions, log-probs, values and next state."""
        request = self.link.request
        request.obs[...] = obs
        request.noise[...] = noise
        if state is not None:
            request.state[...] = state
        reply = self.link.call(STEP, len(obs))
        return (reply.actions.copy(), reply.log_probs.copy(), reply.values.copy(),
                None if state is None else reply.state.copy())

    def value(self, obs: np.ndarray, state: np.ndarray | None = None) -> np.ndarray:
        """Send a VALUE request for the ``len(obs)`` rows and return a copy of their values."""
        count = len(obs)
        request = self.link.request
        request.obs[:count] = obs
        if state is not None:
            request.state[:count] = state
        return self.link.call(VALUE, count).values[:count].copy()


class RemotePolicyEngine:
    """An off-policy engine's ``act`` (:mod:`hpcrl.core.acting`) run on an
    inference rank."""

    def __init__(self, link: RemoteLink) -> None:
        self.link = link

    def sync(self) -> None:
        """Nothing to do: the inference rank holds the weights."""
        pass

    def act(self, obs: np.ndarray, noise: np.ndarray | None = None) -> np.ndarray:
        """Send an ACT request for ``obs`` (with ``noise`` when given) and return a copy of the
        actions."""
        request = self.link.request
        request.obs[...] = obs
        if noise is not None:
            request.noise[...] = noise
        return self.link.call(ACT, len(obs)).actions.copy()
