"""Rendezvous of torch.distributed over an MPI communicator."""

from __future__ import annotations

import socket

import pytest
import torch
import torch.distributed as dist

from hpcrl.comm import destroy_gradient_group, init_gradient_group, split_by_role, world_comm
from hpcrl.comm.rendezvous import _store_host


@pytest.mark.parallel(3)
@pytest.mark.timeout(60)
def test_group_spans_exactly_the_sub_communicator() -> None:
    comm = world_comm()
    # ranks 1 and 2 are the gradient workers; rank 0 stays out of torch.distributed
    grad = split_by_role(comm, color=1 if comm.rank > 0 else 0, key=comm.rank)
    if comm.rank > 0:
        init_gradient_group(grad, "gloo", "cpu")
        torch_rank, torch_size = dist.get_rank(), dist.get_world_size()
        t = torch.tensor([float(comm.rank)])
        dist.all_reduce(t)
        destroy_gradient_group()
        assert (torch_rank, torch_size) == (grad.Get_rank(), 2)
        assert t.item() == 3.0
    else:
        assert not dist.is_initialized()
    grad.Free()


@pytest.mark.parallel(2)
@pytest.mark.timeout(60)
def test_store_failure_on_rank0_reaches_every_rank() -> None:
    comm = world_comm()
    with pytest.raises(RuntimeError, match="rank 0 could not open the rendezvous TCPStore"):
        init_gradient_group(comm, "gloo", "cpu", host="no-such-host.invalid", timeout_s=1.0)
    assert not dist.is_initialized()


def test_store_host_choice() -> None:
    me = socket.gethostname()
    assert _store_host([me, me, me]) == "127.0.0.1"
    # a peer reached over loopback gives no routable address: fall back to our hostname
    assert _store_host([me, "localhost"]) == me
    assert _store_host([me, "no-such-host.invalid"]) == me
