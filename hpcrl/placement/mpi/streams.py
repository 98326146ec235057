"""A collector's stream of step buffers to its learner, through shared memory or messages.

A collector streams fixed-size buffers (rollouts, or an off-policy agent's transition
chunks), each a float32 ``data`` array and a small float64 ``header``, with ``TAG_ROLLOUT``.

* **messages** (peers on different nodes, or ``scheme.transport=messages``): the collector
  fills one of two buffers of its own and sends header and data (lz4-compressed with
  ``scheme.compress=lz4``); the learner receives both into its buffer.
* **shared memory** (peers on one node): the collector fills the data straight into one of
  :data:`~hpcrl.placement.mpi.node_transport.STREAM_SLOTS` slots of its region of the
  node's window and sends the header alone, synchronously; the learner reads the data where
  it lies. Slot ``m % SLOTS`` holds message ``m`` on both sides (MPI keeps the order of
  messages between two ranks), so the header needs no slot number.

The one rule a receiver keeps: it posts the receive of message ``m + 1`` only once it no
longer reads message ``m``. A synchronous send completes only when its receive was posted,
and a collector waits for the send of message ``m + 1`` before it fills message ``m + 3``,
so the slot it fills (that of ``m``) is free: no "slot free" message is needed.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from hpcrl.placement.mpi.node_transport import STREAM, STREAM_SLOTS
from hpcrl.roles.protocol import TAG_ROLLOUT


def _slots(layout: Any, region: np.ndarray, owner: int) -> list[Any]:
    """The step buffers in ``owner``'s stream region, each with a header of its own."""
    words = layout.data_size
    if region.nbytes != STREAM_SLOTS * words * 4:
        raise RuntimeError(f"rank {owner}'s stream region holds {region.nbytes} bytes where "
                           f"this rank's layout needs {STREAM_SLOTS * words * 4}: the ranks "
                           f"built different layouts from one config")
    data = region.view(np.float32)
    return [layout.new(data[k * words:(k + 1) * words]) for k in range(STREAM_SLOTS)]


class StreamOut:
    """The collector's end: the buffer to fill next, and the send of a filled one.

    ``synchronous``: messages complete only once the learner posted their receive (a
    replay learner holds a collector back that way); shared-memory headers always are.
    """

    def __init__(self, job: Any, layout: Any, synchronous: bool = False) -> None:
        self.channel, self.dest = job.channel, job.workers[job.role.group]
        region = None if job.memory is None else job.memory.region(job.rank, STREAM)
        self.memory = job.memory if region is not None else None
        self.buffers = ([layout.new(), layout.new()] if region is None
                        else _slots(layout, region, job.rank))
        self.codec = job.codec  # messages only: nothing is copied through shared memory
        self.synchronous = synchronous
        self.count = 0  # messages sent

    @property
    def shared(self) -> bool:
        """Whether rollouts go through the node's shared memory (else as messages)."""
        return self.memory is not None

    def next_buffer(self) -> Any:
        """The buffer the next message is filled into (untouched by the learner now, once
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
    """The learner's end of one collector's stream: the buffer the next message lands in."""

    def __init__(self, job: Any, source: int, layout: Any) -> None:
        self.channel, self.source = job.channel, source
        region = None if job.memory is None else job.memory.region(source, STREAM)
        self.memory = job.memory if region is not None else None
        self.slots = [layout.new()] if region is None else _slots(layout, region, source)
        self.codec = job.codec
        self.wire = None if region is not None else self.codec.wire(self.slots[0].data)
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
        the collector's stores to its slot made visible."""
        for request in self.requests[1:]:
            self.channel.wait(request)
        if self.memory is not None:
            self.memory.fence()
        else:
            self.codec.unpack(self.wire, self.buffer.data)
        return self.buffer

    def next_waiting(self) -> bool:
        """Whether the collector has sent its next message already, while this end holds
        the last one (its receive not posted): a header waits to be received."""
        return self.channel.probe(self.source, TAG_ROLLOUT) is not None

    def cancel(self) -> None:
        """Withdraw the posted receive (at the end of the job)."""
        for request in self.requests:
            self.channel.cancel(request)
        self.requests = []


