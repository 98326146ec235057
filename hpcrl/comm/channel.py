"""Point-to-point traffic as one protocol: a :class:`Channel` between this rank and its peers.

Every exchange of the roles that is not a collective (rollouts and chunks streamed to a
learner, weights to collectors, acting requests to an inference rank, checkpoint states
to the leader, small notices) goes through a channel: fixed numpy buffers by tag, without
pickling, or a picklable object where a state is sent once. Requests are opaque handles
the channel operates on (:meth:`Channel.test`, :meth:`Channel.wait`,
:meth:`Channel.cancel`), so the roles' code names no transport.

Two transports implement it: :class:`MpiChannel` over an MPI communicator (the buffer
calls of mpi4py, waits polled with back-off so they never spin), and :class:`LocalChannel`,
a size-1 in-process one whose rank 0 sends to itself (what a one-process run and the
tests of the role protocols use). A new transport is one class of this protocol.
"""
from __future__ import annotations

import pickle
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

import hpcrl.comm.buffers as buffers
from hpcrl.comm.buffers import DEFAULT_POLL, Envelope, Poll, poll_until
from hpcrl.comm.world import SelfComm

Request = Any  # a transport's own request handle, operated through its channel


class Channel(Protocol):
    """Point-to-point messages between this rank and the ranks of its job."""

    def isend(self, buf: np.ndarray, dest: int, tag: int, synchronous: bool = False
              ) -> Request:
        """Start sending ``buf`` (untouched until the send completes) to ``dest``;
        ``synchronous``: complete only once ``dest`` posted the matching receive."""
        ...

    def irecv(self, buf: np.ndarray, source: int | None = None, tag: int | None = None
              ) -> Request:
        """Start receiving into ``buf``; ``None`` source or tag matches any."""
        ...

    def send(self, buf: np.ndarray, dest: int, tag: int) -> None:
        """Send ``buf`` to ``dest`` and return once it may be reused."""
        ...

    def isend_object(self, obj: Any, dest: int, tag: int) -> Request:
        """Start sending a picklable object (a state sent once, not a stream)."""
        ...

    def send_object(self, obj: Any, dest: int, tag: int) -> None:
        """Send a picklable object and return once it is on its way."""
        ...

    def recv_object(self, source: int, tag: int) -> Any:
        """Receive the object ``source`` sent with ``tag`` (it must be pending or coming)."""
        ...

    def probe(self, source: int | None = None, tag: int | None = None) -> Envelope | None:
        """The envelope of a pending message that matches, or None; receives nothing."""
        ...

    def test(self, request: Request) -> bool:
        """Whether ``request`` completed (a completed receive's buffer is filled)."""
        ...

    def cancel(self, request: Request) -> None:
        """Withdraw a pending receive and wait until it is withdrawn (or completed)."""
        ...

    def wait(self, request: Request, poll: Poll = DEFAULT_POLL,
             timeout: float | None = None) -> Envelope:
        """Wait for ``request`` without spinning; its envelope. TimeoutError after
        ``timeout`` seconds, the request left active."""
        ...

    def wait_any(self, requests: Sequence[Request], poll: Poll = DEFAULT_POLL,
                 timeout: float | None = None, idle: Callable[[], Any] | None = None
                 ) -> tuple[int, Envelope]:
        """Wait until one of ``requests`` completes (``idle`` called between polls); its
        index and envelope. A completed request is not reported again."""
        ...


def channel_for(comm: Any) -> Channel:
    """The channel of a job's world ``comm``: in this process for the one-process stand-in
    (:class:`~hpcrl.comm.world.SelfComm`), else over MPI."""
    return LocalChannel() if isinstance(comm, SelfComm) else MpiChannel(comm)


class MpiChannel:
    """A :class:`Channel` over an mpi4py communicator ``comm`` (the job's world)."""

    def __init__(self, comm: Any) -> None:
        self.comm = comm

    def isend(self, buf: np.ndarray, dest: int, tag: int, synchronous: bool = False
              ) -> Request:
        """See :meth:`Channel.isend` (``Isend``, or ``Issend`` when synchronous)."""
        return buffers.isend(self.comm, buf, dest, tag, synchronous)

    def irecv(self, buf: np.ndarray, source: int | None = None, tag: int | None = None
              ) -> Request:
        """See :meth:`Channel.irecv` (``Irecv``)."""
        return buffers.irecv(self.comm, buf, source, tag)

    def send(self, buf: np.ndarray, dest: int, tag: int) -> None:
        """See :meth:`Channel.send`: a polled wait on ``Isend``, which never spins a core."""
        buffers.wait(buffers.isend(self.comm, buf, dest, tag))

    def isend_object(self, obj: Any, dest: int, tag: int) -> Request:
        """See :meth:`Channel.isend_object` (mpi4py's pickling ``isend``)."""
        return self.comm.isend(obj, dest=dest, tag=tag)

    def send_object(self, obj: Any, dest: int, tag: int) -> None:
        """See :meth:`Channel.send_object` (mpi4py's pickling ``send``)."""
        self.comm.send(obj, dest=dest, tag=tag)

    def recv_object(self, source: int, tag: int) -> Any:
        """See :meth:`Channel.recv_object` (mpi4py's pickling ``recv``)."""
        return self.comm.recv(source=source, tag=tag)

    def probe(self, source: int | None = None, tag: int | None = None) -> Envelope | None:
        """See :meth:`Channel.probe` (``Iprobe``; a dead peer of a job that survives
        losses is acknowledged and no message is reported)."""
        return buffers.probe_any(self.comm, tag, source)

    def test(self, request: Request) -> bool:
        """See :meth:`Channel.test`."""
        return bool(request.Test())

    def cancel(self, request: Request) -> None:
        """See :meth:`Channel.cancel`."""
        request.Cancel()
        request.Wait()

    def wait(self, request: Request, poll: Poll = DEFAULT_POLL,
             timeout: float | None = None) -> Envelope:
        """See :meth:`Channel.wait`."""
        return buffers.wait(request, poll, timeout)

    def wait_any(self, requests: Sequence[Request], poll: Poll = DEFAULT_POLL,
                 timeout: float | None = None, idle: Callable[[], Any] | None = None
                 ) -> tuple[int, Envelope]:
        """See :meth:`Channel.wait_any`."""
        return buffers.wait_any(requests, poll, timeout, idle)


@dataclass(eq=False)
class LocalRequest:
    """A send or receive of a :class:`LocalChannel`: done once matched."""

    tag: int | None
    buf: np.ndarray | None = None  # a receive's buffer, or a synchronous send's data
    done: bool = False
    cancelled: bool = False
    reported: bool = False  # wait_any has returned it
    envelope: Envelope = field(default_factory=lambda: Envelope(0, -1, 0))


class LocalChannel:
    """A :class:`Channel` of one process: rank 0 sends to itself.

    A send is matched with the oldest posted receive of its tag, else kept (a copy,
    taken at once: the sender may reuse its buffer) until one is posted; messages of one
    tag arrive in the order sent, as MPI's do. A synchronous send completes when
    received. Nothing else runs while this process waits, so a wait that nothing can
    complete raises at once instead of hanging (unless ``wait_any`` calls an ``idle``
    that may send, or a timeout is given)."""

    def __init__(self) -> None:
        # messages sent and not yet received: (tag, payload, the synchronous sender or None)
        self._pending: deque[tuple[int, Any, LocalRequest | None]] = deque()
        self._receives: deque[LocalRequest] = deque()  # posted, not yet matched

    @staticmethod
    def _check_peer(rank: int | None) -> None:
        if rank not in (None, 0):
            raise ValueError(f"a one-process channel reaches rank 0 alone, not rank {rank}")

    def _deliver(self, tag: int, payload: Any, sender: LocalRequest | None) -> bool:
        """Hand a message to the oldest receive posted for its tag; False when none is."""
        for receive in self._receives:
            if receive.tag is None or receive.tag == tag:
                self._receives.remove(receive)
                self._complete(receive, tag, payload)
                if sender is not None:
                    sender.done = True
                return True
        return False

    @staticmethod
    def _complete(receive: LocalRequest, tag: int, payload: Any) -> None:
        buf = receive.buf
        assert buf is not None
        data = np.asarray(payload).reshape(-1).view(np.uint8)
        target = buf.reshape(-1).view(np.uint8)
        if data.nbytes > target.nbytes:
            raise ValueError(f"a message of {data.nbytes} bytes (tag {tag}) does not fit "
                             f"the receive buffer of {target.nbytes} bytes")
        target[:data.nbytes] = data
        receive.done = True
        receive.envelope = Envelope(0, tag, data.nbytes)

    def isend(self, buf: np.ndarray, dest: int, tag: int, synchronous: bool = False
              ) -> LocalRequest:
        """See :meth:`Channel.isend`."""
        self._check_peer(dest)
        if tag < 0:
            raise ValueError(f"a send tag must be >= 0, got {tag}")
        request = LocalRequest(tag, envelope=Envelope(0, tag, buf.nbytes))
        sender = request if synchronous else None
        if not self._deliver(tag, buf, sender):  # kept: a copy, the sender may reuse buf
            self._pending.append((tag, np.ascontiguousarray(buf).copy(), sender))
        if not synchronous:
            request.done = True
        return request

    def irecv(self, buf: np.ndarray, source: int | None = None, tag: int | None = None
              ) -> LocalRequest:
        """See :meth:`Channel.irecv`."""
        self._check_peer(source)
        request = LocalRequest(tag, buf)
        for i, (sent_tag, payload, sender) in enumerate(self._pending):
            if (tag is None or tag == sent_tag) and not isinstance(payload, bytes):
                del self._pending[i]
                self._complete(request, sent_tag, payload)
                if sender is not None:
                    sender.done = True
                return request
        self._receives.append(request)
        return request

    def send(self, buf: np.ndarray, dest: int, tag: int) -> None:
        """See :meth:`Channel.send` (kept until received: it never blocks)."""
        self.isend(buf, dest, tag)

    def isend_object(self, obj: Any, dest: int, tag: int) -> LocalRequest:
        """See :meth:`Channel.isend_object` (pickled now, as MPI would)."""
        self._check_peer(dest)
        self._pending.append((tag, pickle.dumps(obj), None))
        return LocalRequest(tag, done=True)

    def send_object(self, obj: Any, dest: int, tag: int) -> None:
        """See :meth:`Channel.send_object`."""
        self.isend_object(obj, dest, tag)

    def recv_object(self, source: int, tag: int) -> Any:
        """See :meth:`Channel.recv_object`; raises when no such object was sent."""
        self._check_peer(source)
        for i, (sent_tag, payload, _) in enumerate(self._pending):
            if sent_tag == tag and isinstance(payload, bytes):
                del self._pending[i]
                return pickle.loads(payload)
        raise RuntimeError(f"no object with tag {tag} was sent in this process: a receive "
                           "would wait forever")

    def probe(self, source: int | None = None, tag: int | None = None) -> Envelope | None:
        """See :meth:`Channel.probe`."""
        self._check_peer(source)
        for sent_tag, payload, _ in self._pending:
            if tag is None or tag == sent_tag:
                size = len(payload) if isinstance(payload, bytes) else payload.nbytes
                return Envelope(0, sent_tag, size)
        return None

    def test(self, request: LocalRequest) -> bool:
        """See :meth:`Channel.test`."""
        return request.done

    def cancel(self, request: LocalRequest) -> None:
        """See :meth:`Channel.cancel`."""
        if not request.done and request in self._receives:
            self._receives.remove(request)
            request.cancelled = True

    def wait(self, request: LocalRequest, poll: Poll = DEFAULT_POLL,
             timeout: float | None = None) -> Envelope:
        """See :meth:`Channel.wait`; raises at once when nothing can complete it."""
        if not request.done and timeout is None:
            raise RuntimeError(f"waiting on a message of tag {request.tag} that nothing in "
                               "this process will send: it would wait forever")
        return poll_until(lambda: request.envelope if request.done else None, poll, timeout,
                          "the request")

    def wait_any(self, requests: Sequence[LocalRequest], poll: Poll = DEFAULT_POLL,
                 timeout: float | None = None, idle: Callable[[], Any] | None = None
                 ) -> tuple[int, Envelope]:
        """See :meth:`Channel.wait_any`."""
        live = [r for r in requests if not r.reported and not r.cancelled]
        if not live:
            raise ValueError("wait_any was given no active request")
        if idle is None and timeout is None and not any(r.done for r in live):
            raise RuntimeError("waiting on messages that nothing in this process will send: "
                               "it would wait forever")

        def done() -> tuple[int, Envelope] | None:
            for i, r in enumerate(requests):
                if r.done and not r.reported and not r.cancelled:
                    r.reported = True
                    return i, r.envelope
            return None

        return poll_until(done, poll, timeout, "any of the requests", idle)
