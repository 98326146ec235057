"""Buffer collectives over a communicator, without pickling: reduce, gather, broadcast.

Thin, typed wrappers so role code never names mpi4py constants. All buffers are
C-contiguous numpy arrays; each call is collective over ``comm``.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from hpcrl.comm._mpi import Comm, mpi


def reduce_sum_(comm: Comm, buf: np.ndarray, root: int = 0) -> np.ndarray:
    """Sum ``buf`` over the ranks into ``buf`` on ``root`` (others' ``buf`` is unchanged)."""
    MPI = mpi()
    if comm.Get_rank() == root:
        comm.Reduce(MPI.IN_PLACE, buf, op=MPI.SUM, root=root)
    else:
        comm.Reduce(buf, None, op=MPI.SUM, root=root)
    return buf


def gather_rows(comm: Comm, row: np.ndarray, root: int = 0) -> Optional[np.ndarray]:
    """Stack every rank's ``row`` (same shape and dtype) on ``root``; None elsewhere."""
    out = (np.empty((comm.Get_size(),) + row.shape, row.dtype)
           if comm.Get_rank() == root else None)
    comm.Gather(row, out, root=root)
    return out


def bcast_(comm: Comm, buf: np.ndarray, root: int = 0) -> np.ndarray:
    """Overwrite ``buf`` on every rank with ``root``'s."""
    comm.Bcast(buf, root=root)
    return buf
