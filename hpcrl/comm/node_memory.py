"""Memory that the ranks of one node map together: an MPI-3 shared window.

Ranks of one node that exchange big fixed-size buffers every step (a collector's rollouts to
its learner, its observations and actions to its inference rank) can leave the bytes where
they are instead of messaging them: the writer fills a region of a window every rank of the
node maps, and a small message says the region is ready. MPI's own shared-memory channel
copies a message twice (into the channel, out of it); a region is written once and read in
place.

:func:`node_peers` finds which ranks share this rank's node (``COMM_TYPE_SHARED``);
:class:`NodeMemory` allocates, collectively over the node, one window in which every rank
owns the named regions it asked for (``Win.Allocate_shared``, each rank's part page
aligned), and maps every region of the node. A region's readers find it by its owner and
name. :meth:`NodeMemory.fence` is the memory barrier (``Win.Sync``) a writer runs before its
"ready" message and a reader after receiving it, as MPI's unified memory model asks.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from hpcrl.comm._mpi import Comm, mpi

ALIGN = 4096  # every region starts on its own page
SHM_DIR = "/dev/shm"  # where MPICH and Open MPI back their shared windows on Linux


def aligned(nbytes: int) -> int:
    """``nbytes`` rounded up to a whole number of :data:`ALIGN` pages."""
    return -(-nbytes // ALIGN) * ALIGN


@dataclass(frozen=True)
class NodePeers:
    """The ranks (of the world) on this rank's node, and the node communicator."""

    comm: Any
    ranks: tuple[int, ...]

    def shares(self, rank: int) -> bool:
        """Whether world rank ``rank`` is on this node."""
        return rank in self.ranks

    def free(self) -> None:
        """Free the node communicator (collective over the node)."""
        self.comm.Free()


def node_peers(world: Comm) -> NodePeers:
    """The ranks of ``world`` that share this rank's node (collective over ``world``)."""
    node = world.Split_type(mpi().COMM_TYPE_SHARED, key=world.Get_rank())
    return NodePeers(node, tuple(node.allgather(world.Get_rank())))


def shm_free_bytes(path: str = SHM_DIR) -> int | None:
    """Bytes free in the file system that backs shared windows (None: no such directory,
    the MPI library finds its own place)."""
    try:
        stats = os.statvfs(path)
    except OSError:
        return None
    return stats.f_bavail * stats.f_frsize


class NodeMemory:
    """One shared window over the ranks of a node, cut into named regions per owner.

    ``regions``: this rank's own regions, name -> bytes. Collective over ``peers.comm``:
    every rank of the node constructs it at the same point (with no regions if it owns
    none). Regions of other nodes do not exist here (:meth:`region` gives None).
    """

    def __init__(self, peers: NodePeers, world_rank: int, regions: dict[str, int]) -> None:
        MPI = mpi()
        self.peers = peers
        wanted = peers.comm.allgather({name: int(n) for name, n in regions.items()})
        self.offsets: dict[tuple[int, str], tuple[int, int]] = {}
        sizes = []
        for rank, owned in zip(peers.ranks, wanted, strict=True):
            offset = 0
            for name, nbytes in owned.items():
                self.offsets[(rank, name)] = (offset, nbytes)
                offset += aligned(nbytes)
            sizes.append(offset)
        self.total_bytes = sum(sizes)
        info = MPI.Info.Create()
        info.Set("alloc_shared_noncontig", "true")  # each rank's part on its own pages
        try:
            self.win = MPI.Win.Allocate_shared(sizes[peers.ranks.index(world_rank)], 1,
                                               info, comm=peers.comm)
        finally:
            info.Free()
        self.win.Lock_all(MPI.MODE_NOCHECK)  # one passive epoch for the whole job
        self.bases: dict[int, np.ndarray] = {}
        for index, (rank, size) in enumerate(zip(peers.ranks, sizes, strict=True)):
            if size:
                memory, _ = self.win.Shared_query(index)
                self.bases[rank] = np.frombuffer(memory, np.uint8, size)
        own = self.bases.get(world_rank)
        if own is not None:  # every region starts at zero (its sequence numbers, say)
            own[:] = 0
        self.fence()
        peers.comm.Barrier()  # no rank reads a region before its owner zeroed it
        self.closed = False

    def region(self, owner: int, name: str) -> np.ndarray | None:
        """The bytes of ``owner``'s region ``name`` (a writable uint8 view), or None when
        ``owner`` has no such region on this node."""
        place = self.offsets.get((owner, name))
        if place is None:
            return None
        offset, nbytes = place
        return self.bases[owner][offset:offset + nbytes]

    def fence(self) -> None:
        """Make this rank's stores to the window visible to the node (before a "ready"
        message), and the others' visible to this rank (after receiving one)."""
        self.win.Sync()

    def close(self) -> None:
        """Free the window and the node communicator (collective over the node)."""
        if self.closed:
            return
        self.closed = True
        self.bases.clear()
        self.win.Unlock_all()
        self.win.Free()
        self.peers.free()
