"""Acting requests and replies: a collector's observations out, its actions back.

A collector whose actions another process computes (an inference rank) hands over one
request per env step and group of envs: its observations in their own dtype (Atari's uint8
frames stay uint8), the noise its own per-env generators drew and, for a recurrent actor,
the envs' recurrent state; it gets back actions, and for an actor-critic log-probs, values
and the next state. Because the noise travels with the request, a sampled action depends
only on the collector's streams and the weights, never on where it was computed or beside
which other requests (see :mod:`hpcrl.placement.ranks.inference_rank`).

Each request and reply is a fixed-size named-field record (:mod:`hpcrl.numerics.records`) of
an :class:`ActingSpec`, and one pair of them, with what signals that one side may read, is
a *slot*. Two transports carry a slot, behind one pair of ends (:class:`ClientEnd` for the
collector, :class:`ServerEnd` for whoever computes the actions):

* **the node's shared window** (:class:`SharedSlot`): both records lie in memory the two
  ranks map; the request and the reply are each announced by bumping a sequence number in
  the slot's control words, which the other side polls. No message crosses: a round trip
  costs two memory barriers and the polling. This is the path within a node.
* **messages** (:class:`MessageSlot`): the records cross as MPI messages through a
  :class:`~hpcrl.comm.channel.Channel`, for a collector on another node than its inference
  rank.

A collector with ``scheme.env_groups`` groups of envs has one slot per group, so one group's
request can be in flight while another group steps.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from hpcrl.comm.buffers import Poll
from hpcrl.comm.channel import Channel
from hpcrl.models.acting import Step
from hpcrl.numerics.records import Record, RecordLayout

STEP, VALUE, BYE = 1, 2, 4  # what a request asks for (BYE: the collector has left; 3 was ACT)

# the control words of a shared slot: the request's sequence number at word 0 (written by
# the collector), the reply's at word CONTROL_WORDS // 2 (written by the server), each on a
# cache line of its own so that the two writers never share one
CONTROL_WORDS = 32  # float32 words: 128 bytes, two 64-byte cache lines

# How a collector waits for its reply: spin (yielding the core) for a short while, since
# the reply of a batched forward comes within tens of microseconds, then sleep with back-off
# (a sleep of any length costs ~50 us of timer slack on Linux).
REPLY_SPIN_S = 200e-6
REPLY_POLL = Poll(initial_s=5e-6, max_s=2e-4, growth=1.5)


class ActRequest(Record):
    """A collector's request (:meth:`ActingSpec.request_layout`): its fields, declared for
    the type checker (views of the record's buffer, ``[envs, ...]`` per env). ``noise``
    exists only when the policy draws noise, ``state`` only for a recurrent actor."""

    method: np.ndarray  # int64 scalar: STEP, VALUE or BYE
    version: np.ndarray  # int64 scalar: the weights version the collector needs
    count: np.ndarray  # int64 scalar: rows a VALUE request fills
    obs: np.ndarray
    noise: np.ndarray
    state: np.ndarray


class ActReply(Record):
    """A reply (:meth:`ActingSpec.reply_layout`): its fields, declared for the type checker.
    ``log_probs`` and ``values`` exist only for an actor-critic, ``state`` only for a
    recurrent actor."""

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
    ``action``: the shape and dtype of one env's action; ``reply_fields``: what the reply
    holds for each env beside its action (an actor-critic's step: its log-prob and value;
    an action-only policy: nothing). A family's wiring builds its spec
    (:meth:`~hpcrl.algorithms.family.FamilyWiring.acting_spec`): the inference rank answers
    every spec alike, with its engine's step (:func:`reply_of`).
    """

    obs_shape: tuple[int, ...]
    obs_dtype: str
    noise_shape: tuple[int, ...] | None
    state_size: int
    action_shape: tuple[int, ...]
    action_dtype: str
    reply_fields: tuple[str, ...]

    def request_layout(self, envs: int) -> RecordLayout[ActRequest]:
        """The record a group of ``envs`` envs sends: method, version, count, observations,
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
        """The record that answers it: version, actions, one float per env for each of the
        ``reply_fields``, and the next recurrent state when there is one."""
        fields: list[Any] = [("version", (), np.int64),
                             ("actions", (envs,) + self.action_shape,
                              np.dtype(self.action_dtype))]
        fields += [(name, (envs,), np.float32) for name in self.reply_fields]
        if self.state_size:
            fields.append(("state", (envs, self.state_size), np.float32))
        return RecordLayout(fields, record_type=ActReply)

    def slot_words(self, envs: int) -> int:
        """float32 words of one shared slot for ``envs`` envs: control words, request,
        reply."""
        return CONTROL_WORDS + self.request_layout(envs).words + self.reply_layout(envs).words


def reply_of(step: Step, spec: ActingSpec) -> dict[str, np.ndarray]:
    """The reply's fields by name of an engine's ``step``: its actions, each of the spec's
    ``reply_fields`` (the step's field of that name: an actor-critic's log-probs and
    values), and the next recurrent state where the policy has one."""
    out = {"actions": step.actions}
    for name in spec.reply_fields:
        value = getattr(step, name)
        if value is None:
            raise ValueError(f"the acting spec's reply holds {name}, which this policy's "
                             f"engine does not give")
        out[name] = value
    if step.state is not None:
        out["state"] = step.state
    return out


def actor_critic_spec(actor: Any, obs_shape: tuple[int, ...], obs_dtype: str,
                      action_shape: tuple[int, ...]) -> ActingSpec:
    """The spec of an actor-critic's steps (:class:`~hpcrl.models.actor.ActorCritic`)."""
    return ActingSpec(tuple(obs_shape), str(np.dtype(obs_dtype)),
                      tuple(actor.distribution.noise_shape()),
                      actor.state_size if actor.recurrent else 0, tuple(action_shape),
                      "int64" if actor.integer_actions else "float32",
                      reply_fields=("log_probs", "values"))


def policy_spec(obs_shape: tuple[int, ...], obs_dtype: str, discrete: bool, sampling: bool,
                action_dim: int) -> ActingSpec:
    """The spec of an off-policy policy's actions (greedy Q, deterministic or squashed
    Gaussian; only the last draws noise, one normal per action dimension)."""
    return ActingSpec(tuple(obs_shape), str(np.dtype(obs_dtype)),
                      (action_dim,) if sampling else None, 0,
                      () if discrete else (action_dim,), "int64" if discrete else "float32",
                      reply_fields=())


def spin_wait(ready: Any, spin_s: float = REPLY_SPIN_S, poll: Poll = REPLY_POLL) -> None:
    """Call ``ready()`` until it is true: in a loop that yields the core for ``spin_s``
    seconds, then with sleeps that grow as ``poll`` says."""
    if ready():
        return
    deadline = time.perf_counter() + spin_s
    while time.perf_counter() < deadline:
        os.sched_yield()
        if ready():
            return
    delay = poll.initial_s
    while not ready():
        time.sleep(delay)
        delay = min(delay * poll.growth, poll.max_s)



def serve_until(work: Any, done: Any, spin_s: float = REPLY_SPIN_S,
                poll: Poll = REPLY_POLL) -> None:
    """Call ``work()`` (True when it found something to do) until ``done()``: at once again
    while it finds work; once it found none, in a loop that yields the core for ``spin_s``
    seconds, then with sleeps that grow as ``poll`` says. A server in a steady stream of
    requests answers within microseconds (a sleep of any length would cost ~50 us of timer
    slack), and an idle one costs next to nothing."""
    delay, idle_since = poll.initial_s, None
    while not done():
        if work():
            delay, idle_since = poll.initial_s, None
            continue
        now = time.perf_counter()
        if idle_since is None:
            idle_since = now
        if now - idle_since < spin_s:
            os.sched_yield()
            continue
        time.sleep(delay)
        delay = min(delay * poll.growth, poll.max_s)


class ClientEnd(Protocol):
    """The collector's end of a slot: fill :attr:`request`, :meth:`post` it, then wait for
    :attr:`reply` (:meth:`wait` or :meth:`ready`). One request is in flight at a time."""

    request: ActRequest
    reply: ActReply

    def post(self) -> None:
        """Hand the filled request over."""
        ...

    def ready(self) -> bool:
        """Whether the reply to the posted request is there to read (one poll)."""
        ...

    def wait(self) -> ActReply:
        """Wait for the reply to the posted request; returns it."""
        ...

    def leave(self) -> None:
        """Tell the server this collector will ask nothing more (a BYE request)."""
        ...


class ServerEnd(Protocol):
    """The server's end of a slot: :meth:`ready` says a request is in :attr:`request`;
    the answer is written into :attr:`reply` and handed back with :meth:`answer`."""

    request: ActRequest
    reply: ActReply

    def ready(self) -> bool:
        """Whether a request arrived that was not answered yet (one poll)."""
        ...

    def answer(self) -> None:
        """Hand the filled reply back (a BYE is not answered: :meth:`consume` it)."""
        ...

    def consume(self) -> None:
        """Take the arrived request without an answer (a BYE)."""
        ...

    def close(self) -> None:
        """Withdraw what is still posted (the collector has left)."""
        ...


def slot_records(spec: ActingSpec, envs: int, words: np.ndarray
                 ) -> tuple[np.ndarray, ActRequest, ActReply]:
    """The control words, request and reply of a shared slot laid in ``words`` (float32,
    :meth:`ActingSpec.slot_words` of them)."""
    request_layout, reply_layout = spec.request_layout(envs), spec.reply_layout(envs)
    a, b = request_layout.words, reply_layout.words
    if words.size != CONTROL_WORDS + a + b:
        raise RuntimeError(f"an acting slot holds {words.size} words where this rank's "
                           f"records need {CONTROL_WORDS + a + b}: the ranks built "
                           f"different acting specs from one config")
    control = words[:CONTROL_WORDS].view(np.int64)
    request = request_layout.wrap(words[CONTROL_WORDS:CONTROL_WORDS + a])
    reply = reply_layout.wrap(words[CONTROL_WORDS + a:CONTROL_WORDS + a + b])
    return control, request, reply


class _Shared:
    """A slot in the node's shared window (``words``), both ends: sequence numbers in the
    control words say which record may be read. ``fence`` is the window's memory barrier
    (:meth:`~hpcrl.comm.node_memory.NodeMemory.fence`)."""

    REQUEST, REPLY = 0, CONTROL_WORDS // 4  # int64 indices of the two sequence numbers

    def __init__(self, spec: ActingSpec, envs: int, words: np.ndarray, fence: Any) -> None:
        self.control, self.request, self.reply = slot_records(spec, envs, words)
        self.fence = fence


class SharedSlot(_Shared):
    """The collector's end of a slot in the node's shared window (:class:`ClientEnd`)."""

    def __init__(self, spec: ActingSpec, envs: int, words: np.ndarray, fence: Any) -> None:
        super().__init__(spec, envs, words, fence)
        self.sent = int(self.control[self.REQUEST])  # requests posted so far

    def post(self) -> None:
        """Make the request's stores visible, then bump its sequence number."""
        self.fence()
        self.sent += 1
        self.control[self.REQUEST] = self.sent

    def ready(self) -> bool:
        """Whether the server has answered the last request (its stores then visible)."""
        if self.control[self.REPLY] != self.sent:
            return False
        self.fence()
        return True

    def wait(self) -> ActReply:
        """Spin, then sleep, until the reply is there."""
        spin_wait(self.ready)
        return self.reply

    def leave(self) -> None:
        """Post a BYE request (not answered)."""
        self.request.set(method=BYE)
        self.post()


class SharedServerSlot(_Shared):
    """The server's end of a slot in the node's shared window (:class:`ServerEnd`)."""

    def __init__(self, spec: ActingSpec, envs: int, words: np.ndarray, fence: Any) -> None:
        super().__init__(spec, envs, words, fence)
        self.seen = int(self.control[self.REPLY])  # requests answered or consumed so far

    def ready(self) -> bool:
        """Whether the collector posted a request not answered yet (its stores then
        visible)."""
        if self.control[self.REQUEST] == self.seen:
            return False
        self.fence()
        return True

    def answer(self) -> None:
        """Make the reply's stores visible, then say which request it answers."""
        self.fence()
        self.seen += 1
        self.control[self.REPLY] = self.seen

    def consume(self) -> None:
        """Count the arrived request as seen, without a reply."""
        self.seen += 1

    def close(self) -> None:
        """Nothing is posted in shared memory."""


class MessageSlot:
    """The collector's end of a slot carried as messages to ``server`` through ``channel``
    (:class:`ClientEnd`), with ``tags`` (request, reply) of its own group."""

    def __init__(self, spec: ActingSpec, envs: int, channel: Channel, server: int,
                 tags: tuple[int, int]) -> None:
        self.request = spec.request_layout(envs).new()
        self.reply = spec.reply_layout(envs).new()
        self.channel, self.server, self.tags = channel, server, tags
        self.sends: list[Any] = []
        self.receive: Any = None

    def post(self) -> None:
        """Post the receive of the reply, then send the request."""
        self.receive = self.channel.irecv(self.reply.data, self.server, self.tags[1])
        self.sends = [self.channel.isend(self.request.data, self.server, self.tags[0])]

    def ready(self) -> bool:
        """Whether the reply arrived (the request's send then completed too)."""
        if not self.channel.test(self.receive):
            return False
        for send in self.sends:
            self.channel.wait(send)
        return True

    def wait(self) -> ActReply:
        """Spin, then sleep, until the reply arrived."""
        spin_wait(self.ready)
        return self.reply

    def leave(self) -> None:
        """Send a BYE request and wait until it left."""
        self.request.set(method=BYE)
        self.channel.wait(self.channel.isend(self.request.data, self.server, self.tags[0]))


class MessageServerSlot:
    """The server's end of a slot carried as messages from ``client`` (:class:`ServerEnd`),
    with the client group's ``tags`` (request, reply). A request is received into
    :attr:`request` through a standing receive; a reply is sent from :attr:`reply`, which
    is not written again before that send completed."""

    def __init__(self, spec: ActingSpec, envs: int, channel: Channel, client: int,
                 tags: tuple[int, int]) -> None:
        self.request = spec.request_layout(envs).new()
        self.reply = spec.reply_layout(envs).new()
        self.channel, self.client, self.tags = channel, client, tags
        self.receive: Any = channel.irecv(self.request.data, client, tags[0])
        self.send: Any = None
        self.arrived = False

    def ready(self) -> bool:
        """Whether a request arrived (the last reply's send is then complete: the
        collector posts a request only once it has its reply)."""
        if self.arrived:
            return True
        if self.receive is None or not self.channel.test(self.receive):
            return False
        if self.send is not None:
            self.channel.wait(self.send)
            self.send = None
        self.arrived = True
        return True

    def answer(self) -> None:
        """Send the reply, and post the receive of the next request."""
        self.send = self.channel.isend(self.reply.data, self.client, self.tags[1])
        self.consume()

    def consume(self) -> None:
        """Post the receive of the next request."""
        self.arrived = False
        self.receive = self.channel.irecv(self.request.data, self.client, self.tags[0])

    def close(self) -> None:
        """Withdraw the standing receive, and let the last reply's send complete."""
        if self.receive is not None:
            self.channel.cancel(self.receive)
            self.receive = None
        if self.send is not None:
            self.channel.wait(self.send)
            self.send = None
