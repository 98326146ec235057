"""Non-blocking point-to-point transfers of pre-allocated numpy buffers.

Roles exchange rollouts and weights through fixed, contiguous numpy arrays
with the uppercase (buffer) mpi4py calls, so nothing is pickled. Waiting is
done by polling ``Test`` with a growing sleep: MPI's own blocking waits
busy-spin, which on shared or oversubscribed nodes steals a core from the
collectors that share it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from hpcrl.comm._mpi import Comm, mpi
from hpcrl.comm.faults import is_peer_failure

T = TypeVar("T")

Request = Any  # an mpi4py.MPI.Request; kept as Any so annotations never import mpi4py


@dataclass(frozen=True)
class Poll:
    """Sleep back-off of a polling wait: ``initial_s`` growing by ``growth`` up to ``max_s``."""

    initial_s: float = 50e-6
    max_s: float = 2e-3
    growth: float = 2.0

    def __post_init__(self) -> None:
        if not (0 < self.initial_s <= self.max_s) or self.growth < 1:
            raise ValueError(f"need 0 < initial_s <= max_s and growth >= 1, got {self}")


DEFAULT_POLL = Poll()


@dataclass(frozen=True)
class Envelope:
    """Source, tag and size in bytes of a message (meaningful for receives and probes)."""

    source: int
    tag: int
    nbytes: int


def isend(comm: Comm, buf: np.ndarray, dest: int, tag: int, synchronous: bool = False
          ) -> Request:
    """Start sending ``buf`` to ``dest``; ``buf`` must stay untouched until the wait ends.

    ``synchronous``: the send completes only once ``dest`` posted the matching receive
    (never into MPI's eager buffers), so a receiver that holds its receive back holds the
    sender back: the backpressure of a rate-limited stream.
    """
    _check_buffer(buf, writable=False)
    if tag < 0:
        raise ValueError(f"a send tag must be >= 0, got {tag}")
    return (comm.Issend if synchronous else comm.Isend)(buf, dest, tag)


def irecv(comm: Comm, buf: np.ndarray, source: int | None = None,
          tag: int | None = None) -> Request:
    """Start receiving into ``buf``; ``None`` source or tag matches any."""
    _check_buffer(buf, writable=True)
    MPI = mpi()
    return comm.Irecv(
        buf,
        MPI.ANY_SOURCE if source is None else source,
        MPI.ANY_TAG if tag is None else tag,
    )


def wait(request: Request, poll: Poll = DEFAULT_POLL, timeout: float | None = None) -> Envelope:
    """Wait for ``request`` without spinning; return its envelope.

    Raises TimeoutError after ``timeout`` seconds, leaving the request active
    (the caller may keep waiting or ``Cancel`` it).
    """
    status = mpi().Status()

    def done() -> Envelope | None:
        return _envelope(status) if request.Test(status) else None

    return poll_until(done, poll, timeout, "the request")


def wait_any(
    requests: Sequence[Request],
    poll: Poll = DEFAULT_POLL,
    timeout: float | None = None,
    idle: Callable[[], Any] | None = None,
) -> tuple[int, Envelope]:
    """Wait until one of ``requests`` completes; return its index and envelope.

    The completed request object becomes inactive (MPI.REQUEST_NULL), so
    calling again with the same sequence waits for one of the others.
    ``idle`` is called between polls: the caller's own progress (sending the
    newest weights, say) goes on while it waits.
    """
    MPI = mpi()
    status = MPI.Status()

    def done() -> tuple[int, Envelope] | None:
        index, flag = MPI.Request.Testany(requests, status)
        if not flag:
            return None
        if index == MPI.UNDEFINED:
            raise ValueError("wait_any was given no active request")
        return index, _envelope(status)

    return poll_until(done, poll, timeout, "any of the requests", idle)


def probe_any(comm: Comm, tag: int | None = None, source: int | None = None) -> Envelope | None:
    """The envelope of a pending message matching ``tag``/``source`` (None: any), or None.

    Does not block and does not receive; use it to size or route the receive.
    """
    MPI = mpi()
    status = MPI.Status()
    try:
        found = comm.Iprobe(
            MPI.ANY_SOURCE if source is None else source,
            MPI.ANY_TAG if tag is None else tag,
            status,
        )
    except MPI.Exception as exc:
        if source is not None or not is_peer_failure(exc):
            raise  # a dead ``source`` is the caller's to handle
        comm.Ack_failed()  # a peer died (in a job that survives it): any source again
        return None
    return _envelope(status) if found else None


def wait_probe(
    comm: Comm,
    tag: int | None = None,
    source: int | None = None,
    poll: Poll = DEFAULT_POLL,
    timeout: float | None = None,
) -> Envelope:
    """Like ``probe_any`` but waits (without spinning) until a message is pending."""
    return poll_until(lambda: probe_any(comm, tag, source), poll, timeout, "a message")


def poll_until(
    check: Callable[[], T | None],
    poll: Poll = DEFAULT_POLL,
    timeout: float | None = None,
    what: str = "a result",
    idle: Callable[[], Any] | None = None,
) -> T:
    """Call ``check`` until it returns non-None, sleeping with back-off (and calling
    ``idle``, if given) in between: every polling wait of hpcrl's ranks, so that one
    back-off serves them all."""
    deadline = None if timeout is None else time.monotonic() + timeout
    delay = poll.initial_s
    while True:
        result = check()
        if result is not None:
            return result
        if deadline is not None and time.monotonic() >= deadline:
            raise TimeoutError(f"waited {timeout} s for {what}")
        if idle is not None:
            idle()
        time.sleep(delay)
        delay = min(delay * poll.growth, poll.max_s)


def _envelope(status: Any) -> Envelope:
    return Envelope(source=status.Get_source(), tag=status.Get_tag(), nbytes=status.Get_count())


def _check_buffer(buf: np.ndarray, *, writable: bool) -> None:
    """Only contiguous numpy arrays go on the wire (no pickling, no hidden copies)."""
    if not isinstance(buf, np.ndarray):
        raise TypeError(f"expected a numpy array buffer, got {type(buf).__name__}")
    if not buf.flags.c_contiguous:
        raise ValueError("the buffer must be C-contiguous; pre-allocate it with np.empty")
    if writable and not buf.flags.writeable:
        raise ValueError("the receive buffer is read-only")
