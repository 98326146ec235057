"""World description, role splitting and the single-process stand-in."""

from __future__ import annotations

import socket

import pytest

import hpcrl.comm.world as world
from hpcrl.comm import SelfComm, WorldInfo, split_by_role, world_comm


@pytest.mark.parallel(3)
@pytest.mark.timeout(60)
def test_world_info_and_split_by_role() -> None:
    comm = world_comm()
    info = WorldInfo.from_comm(comm)
    hostnames = comm.allgather(info.hostname)
    # rank 0 is the "updater", ranks 1 and 2 "collectors"; key reverses their order
    color = 0 if comm.rank == 0 else 1
    sub = split_by_role(comm, color=color, key=-comm.rank)
    sub_rank, sub_size = sub.Get_rank(), sub.Get_size()
    sub.Free()

    assert (info.rank, info.size) == (comm.rank, 3)
    assert info.local_size == 3 and info.local_rank == comm.rank  # one node
    assert len(set(hostnames)) == 1 and info.hostname == socket.gethostname()
    expected = {0: (0, 1), 1: (1, 2), 2: (0, 2)}[comm.rank]
    assert (sub_rank, sub_size) == expected


def test_world_comm_is_comm_world_in_a_plain_process() -> None:
    from mpi4py import MPI

    assert world_comm() is MPI.COMM_WORLD
    assert WorldInfo.from_comm(world_comm()) == WorldInfo(0, 1, 0, 1, socket.gethostname())


def test_world_comm_falls_back_without_mpi(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(world, "try_mpi", lambda: None)
    monkeypatch.setattr(world, "unavailable_reason", lambda: "ImportError: no libmpi")
    with pytest.warns(RuntimeWarning, match="no libmpi"):
        comm = world_comm()
    assert isinstance(comm, SelfComm)
    assert WorldInfo.from_comm(comm) == WorldInfo(0, 1, 0, 1, socket.gethostname())


def test_self_comm_collectives() -> None:
    comm = SelfComm()
    assert (comm.rank, comm.size, comm.Get_rank(), comm.Get_size()) == (0, 1, 0, 1)
    comm.Barrier()
    assert comm.bcast({"a": 1}) == {"a": 1}
    assert comm.allgather(3) == [3] and comm.gather(3) == [3]
    assert comm.allreduce(5) == 5
    assert isinstance(split_by_role(comm, 2, 0), SelfComm)
    with pytest.raises(ValueError, match="root 1"):
        comm.bcast(1, root=1)


def test_split_by_role_rejects_negative_colour() -> None:
    with pytest.raises(ValueError, match="color must be >= 0"):
        split_by_role(SelfComm(), color=-1, key=0)
