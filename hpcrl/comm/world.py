"""Who and where this process is in the job, and splitting it into roles.

``world_comm()`` is the one place in hpcrl that reaches for MPI.COMM_WORLD;
everything else is handed the communicator it works on.
"""

from __future__ import annotations

import os
import socket
import warnings
from dataclasses import dataclass
from typing import Any

from hpcrl.comm._mpi import Comm, mpi, try_mpi, unavailable_reason
from hpcrl.comm.faults import LOST, leave_without_finalize, live_agreement


class SelfComm:
    """A one-process stand-in for an mpi4py intracommunicator.

    ``world_comm()`` returns it when mpi4py cannot be imported or MPI cannot be
    initialised, so that single-process runs and tools still work. It supports
    the subset of the mpi4py API that hpcrl.comm uses on a size-1 group:
    rank/size, barriers, object collectives (bcast, gather, allgather,
    allreduce), Split, Split_type, Dup, Free and Abort. Point-to-point and
    buffer collectives have no meaning with one process and are absent.
    """

    rank = 0
    size = 1

    def Get_rank(self) -> int:
        """0, the only rank."""
        return 0

    def Get_size(self) -> int:
        """1, the only process."""
        return 1

    def Barrier(self) -> None:
        """Nothing to wait for with one process."""
        return None

    barrier = Barrier

    def bcast(self, obj: Any, root: int = 0) -> Any:
        """``obj`` itself (``root`` must be 0)."""
        self._check_root(root)
        return obj

    def gather(self, obj: Any, root: int = 0) -> list[Any]:
        """``[obj]`` (``root`` must be 0)."""
        self._check_root(root)
        return [obj]

    def allgather(self, obj: Any) -> list[Any]:
        """``[obj]``."""
        return [obj]

    def allreduce(self, obj: Any, op: Any = None) -> Any:
        """``obj`` itself: any reduction over one process."""
        return obj

    def Split(self, color: int = 0, key: int = 0) -> SelfComm:
        """A new one-process communicator, whatever the colour."""
        return SelfComm()

    def Split_type(self, split_type: int, key: int = 0, info: Any = None) -> SelfComm:
        """A new one-process communicator: the node is this process."""
        return SelfComm()

    def Dup(self) -> SelfComm:
        """A new one-process communicator."""
        return SelfComm()

    def Free(self) -> None:
        """Nothing to release."""
        return None

    def Abort(self, errorcode: int = 0) -> None:
        """End this process at once, like MPI_Abort on a one-process job."""
        os._exit(errorcode)

    @staticmethod
    def _check_root(root: int) -> None:
        if root != 0:
            raise ValueError(f"root {root} does not exist in a one-process communicator")


def world_comm() -> Comm:
    """MPI.COMM_WORLD, or a SelfComm when MPI is unavailable.

    Falling back (with a warning naming the cause) keeps single-process use
    working on machines without an MPI runtime; a job started by mpirun/srun
    always gets the real COMM_WORLD.
    """
    MPI = try_mpi()
    if MPI is None:
        warnings.warn(
            f"hpcrl: MPI unavailable ({unavailable_reason()}); running as a single process",
            RuntimeWarning,
            stacklevel=2,
        )
        return SelfComm()
    return MPI.COMM_WORLD


@dataclass(frozen=True)
class WorldInfo:
    """This process's place in a communicator and on its node.

    ``local_rank``/``local_size`` count the ranks of the communicator that
    share this node's memory (MPI_COMM_TYPE_SHARED), which is what GPU
    assignment and per-node resource limits need.
    """

    rank: int
    size: int
    local_rank: int
    local_size: int
    hostname: str

    @classmethod
    def from_comm(cls, comm: Comm) -> WorldInfo:
        """Describe this process within ``comm`` (collective over ``comm``)."""
        hostname = socket.gethostname()
        if isinstance(comm, SelfComm):
            return cls(rank=0, size=1, local_rank=0, local_size=1, hostname=hostname)
        local = comm.Split_type(mpi().COMM_TYPE_SHARED, key=comm.Get_rank())
        try:
            local_rank, local_size = local.Get_rank(), local.Get_size()
        finally:
            local.Free()
        return cls(
            rank=comm.Get_rank(),
            size=comm.Get_size(),
            local_rank=local_rank,
            local_size=local_size,
            hostname=hostname,
        )


def split_by_role(comm: Comm, color: int, key: int) -> Comm:
    """Split ``comm`` so that ranks passing the same ``color`` share a new comm.

    Collective over ``comm``: every rank must call it. ``key`` orders the ranks
    inside each new communicator (pass the parent rank to keep their order).
    ``color`` must be >= 0; give each role (or role instance) its own colour.
    """
    if color < 0:
        raise ValueError(f"color must be >= 0 (got {color}); every rank must join some group")
    return comm.Split(color, key)


def finish_world(comm: Comm, role_comms: list[Any], survives: bool = False) -> None:
    """End this rank's part in the job: free its role communicators and meet every rank.

    ``survives``: the job may have gone on without lost ranks. A barrier is then no meeting
    (it fails at once on a rank that sees a dead peer, while the others still work, and a
    rank that leaves early with the job's stop status may make the launcher end the rest
    before rank 0 has written or said its last words), so the live ranks meet in MPI's
    fault-tolerant agreement instead, which returns on no rank before every live rank has
    entered it."""
    for role_comm in role_comms:
        if role_comm is not None and not isinstance(role_comm, SelfComm):
            role_comm.Free()
    if not survives:
        comm.Barrier()
        return

    live_agreement(comm, LOST.ranks())


def finalize_mpi() -> None:
    """Finalise MPI now, while the interpreter is whole, rather than from mpi4py's exit
    hook during interpreter teardown (where ranks of a Slurm PMI-2 step were seen to hang
    now and then after the others had left)."""
    MPI = try_mpi()
    if MPI is None or not MPI.Is_initialized() or MPI.Is_finalized():
        return

    if LOST.enabled:  # (whether this rank heard of a loss or not yet)
        leave_without_finalize()  # Open MPI's Finalize was seen to spin after a lost rank
        return
    MPI.Finalize()
