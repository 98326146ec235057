"""Buffer collectives over a communicator, without pickling: reduce, gather, broadcast.

Thin, typed wrappers so role code never names mpi4py constants. On a group of one process
(the serial placement's :class:`~hpcrl.comm.world.SelfComm`) they return at once without
touching MPI, so the learner loop runs unchanged in a single process. All buffers are
C-contiguous numpy arrays; each call is collective over ``comm``. They are started
non-blocking and waited on with short sleeps: a rank waiting for its peers (an updater
waiting for gradients, say) does not spin a core the collectors could use.
"""
from __future__ import annotations

import numpy as np

from hpcrl.comm._mpi import Comm, mpi
from hpcrl.comm.buffers import Poll, wait

COLLECTIVE_POLL = Poll(initial_s=20e-6, max_s=5e-4)


def reduce_sum_(comm: Comm, buf: np.ndarray, root: int = 0) -> np.ndarray:
    """Sum ``buf`` over the ranks into ``buf`` on ``root`` (others' ``buf`` is unchanged)."""
    if comm.Get_size() == 1:  # an in-process group (serial placement): nothing to combine
        return buf
    MPI = mpi()
    if comm.Get_rank() == root:
        request = comm.Ireduce(MPI.IN_PLACE, buf, op=MPI.SUM, root=root)
    else:
        request = comm.Ireduce(buf, None, op=MPI.SUM, root=root)
    wait(request, COLLECTIVE_POLL)
    return buf


def gather_rows(comm: Comm, row: np.ndarray, root: int = 0) -> np.ndarray | None:
    """Stack every rank's ``row`` (same shape and dtype) on ``root``; None elsewhere."""
    if comm.Get_size() == 1:
        return row[None].copy()
    out = (np.empty((comm.Get_size(),) + row.shape, row.dtype)
           if comm.Get_rank() == root else None)
    wait(comm.Igather(row, out, root=root), COLLECTIVE_POLL)
    return out


def bcast_(comm: Comm, buf: np.ndarray, root: int = 0) -> np.ndarray:
    """Overwrite ``buf`` on every rank with ``root``'s."""
    if comm.Get_size() == 1:
        return buf
    wait(comm.Ibcast(buf, root=root), COLLECTIVE_POLL)
    return buf


def any_rank(comm: Comm, flag: bool) -> bool:
    """Whether ``flag`` is true on any rank of ``comm`` (collective): how ranks that take
    the same collectives in lock step agree to skip some of them together."""
    if comm.Get_size() == 1:
        return bool(flag)
    MPI = mpi()
    box = np.array([1 if flag else 0], np.int64)
    wait(comm.Iallreduce(MPI.IN_PLACE, box, op=MPI.MAX), COLLECTIVE_POLL)
    return bool(box[0])
