"""Weights delivery as messages: newest-weights to asynchronous collectors, every version
to synchronous ones (both :class:`~hpcrl.exchange.weights.WeightsSync`).

An asynchronous learner must never wait for a slow collector, yet every collector must
end up with the newest weights, and a command (checkpoint, stop) must reach each one
exactly once. :class:`LatestWeights` gives each collector its own send buffer, written
only once that collector took the previous message (a buffer under an ``isend`` still
in flight is never touched), and remembers which collectors are behind, so that
:meth:`LatestWeights.push` (called while the learner waits for rollouts) catches them up
as soon as they are free. Without that catch-up a collector whose send was busy at a
publish would keep its old weights until the next publish, and if every rollout it
sends meanwhile is older than the policy-lag bound, the learner waits forever.
"""
from __future__ import annotations

from typing import Any

from torch import nn

from hpcrl.comm.channel import Channel
from hpcrl.comm.compression import PlainCodec
from hpcrl.exchange.messages import Weights
from hpcrl.exchange.protocol import TAG_WEIGHTS

PLAIN = PlainCodec()  # the default: parameters cross as they are


def send_weights(channel: Channel, weights: Weights, rank: int, params: bool = True,
                 codec: PlainCodec = PLAIN) -> list[Any]:
    """Start sending ``weights`` to ``rank``: the header (command, version, normaliser
    buffers), then the parameters (packed by ``codec``) unless ``params`` is False (a
    collector whose inference rank acts for it); returns the requests."""
    sends = [channel.isend(weights.header.data, rank, TAG_WEIGHTS)]
    if params:
        sends.append(channel.isend(codec.pack(weights.params), rank, TAG_WEIGHTS))
    return sends


class ParamsReceiver:
    """Where a subscriber receives the parameters of a weights message, and their unpacking
    (in place, without compression)."""

    def __init__(self, channel: Channel, weights: Weights, source: int,
                 codec: PlainCodec) -> None:
        self.channel, self.weights, self.source, self.codec = channel, weights, source, codec
        self.wire = codec.wire(weights.params)

    def post(self) -> Any:
        """The receive of the parameters that follow a header; :meth:`unpack` once done."""
        return self.channel.irecv(self.wire, self.source, TAG_WEIGHTS)

    def unpack(self) -> None:
        """Decode the received parameters into the weights (nothing to do without compression)."""
        self.codec.unpack(self.wire, self.weights.params)


class LatestWeights:
    """Per-collector outboxes fed with the newest weights, never overwriting one in flight."""

    def __init__(self, channel: Channel, ranks: list[int],
                 header_only: frozenset[int] = frozenset(), codec: PlainCodec = PLAIN,
                 watch: Any = None) -> None:
        self.channel, self.ranks, self.header_only = channel, list(ranks), header_only
        self.codec = codec
        # the learner's CollectorWatch: a lost collector gets nothing more, and a message
        # it never takes is given up instead of waited for
        self.watch = watch
        self.latest: Weights | None = None
        self.boxes: dict[int, Weights] = {}
        self.sends: dict[int, list] = {}
        self.behind: set[int] = set()

    def publish(self, policy: nn.Module, version: int, command: int = 0,
                block: bool = False) -> None:
        """Make ``policy`` at ``version`` the newest (its parameters copied once, into the
        newest message); ``block``: deliver it to every collector now, waiting for earlier
        messages to be taken (for a message carrying a command)."""
        if self.latest is None:
            self.latest = Weights.empty_like(policy)
        self.latest.capture(policy, version, command)
        self.behind = set(self.ranks)
        self.push(block)

    def offer(self, weights: Weights, block: bool) -> None:
        """Make the message ``weights`` the newest (copied: the caller may reuse it)."""
        if self.latest is None:
            self.latest = weights.copy()
        else:
            self.latest.copy_from(weights)
        self.behind = set(self.ranks)
        self.push(block)

    def push(self, block: bool = False) -> None:
        """Send the newest weights to each collector that lacks them and is free to take
        them (``block``: to every such collector, waiting for it to be free)."""
        if not self.behind:
            return
        assert self.latest is not None  # a rank is behind only once offer() set latest
        for rank in sorted(self.behind):
            if self._lost(rank):
                self.behind.discard(rank)
                continue
            pending = self.sends.get(rank)
            if pending and not self._taken(rank, pending):
                if not block:
                    continue
                if not self._wait(rank, pending):
                    self.behind.discard(rank)
                    continue
            box = self.boxes.get(rank)
            if box is None:
                box = self.boxes[rank] = self.latest.copy()
            else:
                box.copy_from(self.latest)
            self.sends[rank] = send_weights(self.channel, box, rank,
                                            rank not in self.header_only, self.codec)
            self.behind.discard(rank)

    def replace(self, old: int, new: int) -> None:
        """Rank ``new`` (a spare) took the place of the lost collector ``old``: it gets the
        newest message from now on (at once, when there is one: its command included, so
        that a spare that joins while a checkpoint is being taken sends its state too)."""
        self.ranks[self.ranks.index(old)] = new
        self.sends.pop(old, None)
        self.boxes.pop(old, None)
        self.behind.discard(old)
        if self.latest is not None:
            self.behind.add(new)
            self.push()

    def drain(self) -> None:
        """Wait until every message sent was taken (by the collectors still live)."""
        for rank, pending in self.sends.items():
            self._wait(rank, pending)

    def _watched(self, rank: int) -> bool:
        return self.watch is not None and rank in self.watch.ranks

    def _lost(self, rank: int) -> bool:
        return self._watched(rank) and self.watch.is_lost(rank)

    def _taken(self, rank: int, pending: list[Any]) -> bool:
        """Whether ``rank`` took every message of ``pending`` (False once it is lost)."""
        if not self._watched(rank):
            return all(self.channel.test(r) for r in pending)
        return all(self.watch.done(rank, r) for r in pending)

    def _wait(self, rank: int, pending: list[Any]) -> bool:
        """Wait until ``rank`` took ``pending``; False when it was lost meanwhile."""
        if not self._watched(rank):
            for r in pending:
                self.channel.wait(r)
            return True
        return all(self.watch.wait(rank, r) for r in pending)


class BroadcastWeights:
    """Every version to every one of ``ranks`` (synchronous collectors and their inference
    ranks), each taking it before the learner goes on: a synchronous collector waits for
    the weights of each update, with their command. ``header_only``: ranks that take the
    header alone (their inference rank acts for them)."""

    def __init__(self, channel: Channel, ranks: list[int],
                 header_only: frozenset[int] = frozenset(), codec: PlainCodec = PLAIN) -> None:
        self.channel, self.ranks, self.header_only, self.codec = channel, ranks, header_only, codec
        self.message: Weights | None = None

    def publish(self, policy: nn.Module, version: int, command: int = 0,
                block: bool = False) -> None:
        """Send ``policy`` at ``version`` (with ``command``) to every rank, and wait until
        each took it."""
        if self.message is None:
            self.message = Weights.empty_like(policy)
        self.send(self.message.capture(policy, version, command))

    def send(self, weights: Weights) -> None:
        """Send the message ``weights`` to every rank, and wait until each took it."""
        for rank in self.ranks:
            for request in send_weights(self.channel, weights, rank,
                                        rank not in self.header_only, self.codec):
                self.channel.wait(request)

    def push(self, block: bool = False) -> None:
        """Nothing waits: every publish is delivered whole."""

    def drain(self) -> None:
        """Nothing is in flight."""
