"""A collector's stream of step buffers to its learner: in place in a shared window, or as
messages, over any :mod:`hpcrl.comm.channel` (MPI between ranks, in-process for a job of
one process).

A collector streams fixed-size buffers (rollouts, or an off-policy agent's transition
chunks), each a float32 ``data`` array and a small float64 ``header``, with ``TAG_ROLLOUT``.

* **messages** (no shared region: peers on different nodes, ``scheme.transport=messages``,
  or an in-process channel): the sender fills one of two buffers of its own and sends header
  and data (through the ``codec``: lz4 with ``scheme.compress=lz4``); the receiver receives
  both into its buffer.
* **shared region** (peers on one node): the sender fills the data straight into one of
  :data:`STREAM_SLOTS` slots of its region of the node's window and sends the header alone,
  synchronously; the receiver reads the data where it lies. Slot ``m % SLOTS`` holds message
  ``m`` on both sides (channels keep the order of messages between two ends), so the header
  needs no slot number.

The one rule a receiver keeps: it posts the receive of message ``m + 1`` only once it no
longer reads message ``m``. A synchronous send completes only when its receive was posted,
and a sender waits for the send of message ``m + 1`` before it fills message ``m + 3``, so
the slot it fills (that of ``m``) is free: no "slot free" message is needed.

These classes know nothing of ranks' roles or configs: the placement that wires a job
(:mod:`hpcrl.exchange.node_transport`) hands each end its channel, peer, layout, region
and codec.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from hpcrl.exchange.protocol import TAG_ROLLOUT

# a sender fills the next slot while its receiver reads the last one and another waits: a
# slot is written again only once the receiver posted the receive after it
STREAM_SLOTS = 3


def stream_slots(layout: Any, region: np.ndarray, owner: int) -> list[Any]:
    """The step buffers in ``owner``'s stream region, each with a header of its own; a
    region of another size than ``layout`` needs is refused (the two ends built different
    layouts)."""
    words = layout.data_size
    if region.nbytes != STREAM_SLOTS * words * 4:
        raise RuntimeError(f"rank {owner}'s stream region holds {region.nbytes} bytes where "
                           f"this rank's layout needs {STREAM_SLOTS * words * 4}: the ranks "
                           f"built different layouts from one config")
    data = region.view(np.float32)
    return [layout.new(data[k * words:(k + 1) * words]) for k in range(STREAM_SLOTS)]


class StreamOut:
    """The sending end: the buffer to fill next, and the send of a filled one.

    ``channel`` and ``dest``: where the messages go. ``region`` and ``memory``: this end's
    region of the shared window and the window (for its fence), or None for messages.
    ``codec``: packs message data (unused in place). ``synchronous``: messages complete only
    once the receiver posted their receive (a replay learner holds a collector back that
    way); shared-region headers always are. ``owner``: this end's rank, named in errors.
    """

    def __init__(self, channel: Any, dest: int, layout: Any, codec: Any,
                 region: np.ndarray | None = None, memory: Any = None,
                 synchronous: bool = False, owner: int = 0) -> None:
        self.channel, self.dest = channel, dest
        self.memory = memory if region is not None else None
        self.buffers = ([layout.new(), layout.new()] if region is None
                        else stream_slots(layout, region, owner))
        self.codec = codec
        self.synchronous = synchronous
        self.count = 0  # messages sent

    @property
    def shared(self) -> bool:
        """Whether the buffers go through the shared window (else as messages)."""
        return self.memory is not None

    def next_buffer(self) -> Any:
        """The buffer the next message is filled into (untouched by the receiver now, once
        the sends of the message before it completed)."""
        return self.buffers[self.count % len(self.buffers)]

    def send(self, buffer: Any) -> list[Any]:
        """Start sending ``buffer`` (the one :meth:`next_buffer` gave); the requests to wait
        for before the next send."""
        assert buffer is self.next_buffer()
        self.count += 1
        if self.memory is not None:
            self.memory.fence()  # the data is in the window before the header says so
            return [self.channel.isend(buffer.header, self.dest, TAG_ROLLOUT, True)]
        # (the request keeps a compressed payload alive until it completes)
        return [self.channel.isend(buffer.header, self.dest, TAG_ROLLOUT, self.synchronous),
                self.channel.isend(self.codec.pack(buffer.data), self.dest, TAG_ROLLOUT,
                                   self.synchronous)]


class StreamIn:
    """The receiving end of one sender's stream: the buffer the next message lands in.

    ``source``: the sender. ``region`` and ``memory``: the sender's region of the shared
    window and the window, or None for messages; ``codec`` unpacks message data.
    """

    def __init__(self, channel: Any, source: int, layout: Any, codec: Any,
                 region: np.ndarray | None = None, memory: Any = None) -> None:
        self.channel, self.source = channel, source
        self.memory = memory if region is not None else None
        self.slots = [layout.new()] if region is None else stream_slots(layout, region, source)
        self.codec = codec
        self.wire = None if region is not None else codec.wire(self.slots[0].data)
        self.buffer = self.slots[0]
        self.count = 0  # receives posted
        self.requests: list[Any] = []  # of the posted receive: the header's, then the data's

    def post(self) -> Any:
        """Post the receive of the next message (the one before it is no longer read);
        returns the header's request: once it completed, :meth:`take` the message."""
        self.buffer = self.slots[self.count % len(self.slots)]
        self.count += 1
        self.requests = [self.channel.irecv(self.buffer.header, self.source, TAG_ROLLOUT)]
        if self.wire is not None:
            self.requests.append(self.channel.irecv(self.wire, self.source, TAG_ROLLOUT))
        return self.requests[0]

    def take(self) -> Any:
        """The message whose header arrived (its buffer): its data received and unpacked, or
        the sender's stores to its slot made visible."""
        for request in self.requests[1:]:
            self.channel.wait(request)
        if self.memory is not None:
            self.memory.fence()
        else:
            self.codec.unpack(self.wire, self.buffer.data)
        return self.buffer

    def next_waiting(self) -> bool:
        """Whether the sender has sent its next message already, while this end holds the
        last one (its receive not posted): a header waits to be received."""
        return self.channel.probe(self.source, TAG_ROLLOUT) is not None

    def cancel(self) -> None:
        """Withdraw the posted receive (at the end of the job)."""
        for request in self.requests:
            self.channel.cancel(request)
        self.requests = []
