"""Start torch.distributed among exactly the ranks of an MPI communicator.

The gradient workers already share an MPI sub-communicator, so it is used to
rendezvous: rank 0 opens a TCPStore on a port the OS picks (no fixed port, no
race between jobs on one node) and broadcasts ``(host, port)``; the others
connect to it and every rank calls ``init_process_group`` with its MPI rank.

torch.distributed has one default group per process, so a process holds at
most one gradient group at a time: ``destroy_gradient_group()`` before making
another. Every rank of ``comm`` must make (and destroy) groups in the same
order, as with any collective.

Host choice: when all ranks of ``comm`` run on one node the store listens on
127.0.0.1. Otherwise rank 0 uses the address of the interface it would route
through to reach another member's node, falling back to its hostname (left
for the others to resolve). Pass ``host=`` to override, e.g. on nodes with a
separate high-speed network. Gloo itself picks its interface from the
hostname; set GLOO_SOCKET_IFNAME when that resolves to a loopback address.
"""

from __future__ import annotations

import socket
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:  # annotations only: the import itself is heavy
    import torch.distributed as dist

from hpcrl.comm._mpi import Comm

BACKENDS = ("gloo", "nccl")

# The master TCPStore of the current group (on rank 0 of its comm) or the
# client one; held here so that it lives exactly as long as the group.
_store: Any = None  # the torch.distributed TCPStore of this process's group


def init_gradient_group(
    comm: Comm,
    backend: str,
    device: torch.device | str,
    *,
    host: str | None = None,
    timeout_s: float = 300.0,
) -> dist.ProcessGroup:
    """Initialise torch.distributed over the ranks of ``comm``; return its group.

    Collective over ``comm``. ``backend`` is 'gloo' (CPU tensors) or 'nccl'
    (needs a CUDA ``device``, which becomes this rank's current device).
    Torch ranks equal ``comm`` ranks and the world size is ``comm``'s size.
    ``host`` (read on rank 0 only) overrides the store address; ``timeout_s``
    bounds the store connection and every later collective of the group.
    """
    import torch.distributed as dist  # heavy: only where used
    global _store
    backend = backend.lower()
    device = torch.device(device)
    _check_request(backend, device)
    rank, size = comm.Get_rank(), comm.Get_size()
    timeout = timedelta(seconds=timeout_s)
    store = _open_store(comm, rank, size, host, timeout)
    _start_group(backend, device, store, rank, size, timeout)
    _store = store
    # Everyone is past its use of the store for start-up before anyone can
    # return, and so before rank 0 could tear the group (and store) down.
    comm.Barrier()
    group = dist.group.WORLD
    assert group is not None
    return group


def _open_store(
    comm: Comm, rank: int, size: int, host: str | None, timeout: timedelta
) -> dist.TCPStore:
    """The group's TCPStore: rank 0 opens it on a port the OS picks and broadcasts
    ``(host, port)``; the others connect to it. Collective over ``comm``."""
    import torch.distributed as dist  # heavy: only where used
    hostnames = comm.allgather(socket.gethostname())
    store: dist.TCPStore | None = None
    endpoint: tuple[str, int] | str
    if rank == 0:
        try:
            address = host or _store_host(hostnames)
            store = dist.TCPStore(
                address, 0, world_size=size, is_master=True,
                timeout=timeout, wait_for_workers=False,
            )
            endpoint = (address, store.port)
        except Exception as exc:  # tell the others instead of leaving them in bcast
            endpoint = f"{type(exc).__name__}: {exc}"
    else:
        endpoint = ""
    endpoint = comm.bcast(endpoint, root=0)
    if isinstance(endpoint, str):
        raise RuntimeError(f"hpcrl: rank 0 could not open the rendezvous TCPStore: {endpoint}")
    address, port = endpoint
    if store is None:
        store = dist.TCPStore(address, port, world_size=size, is_master=False, timeout=timeout)
    return store


def _start_group(
    backend: str, device: torch.device, store: dist.TCPStore, rank: int, size: int,
    timeout: timedelta,
) -> None:
    """``init_process_group`` through ``store``; with nccl, ``device`` (this rank's current
    CUDA device when it names no index) becomes the current device first."""
    import torch.distributed as dist  # heavy: only where used
    if backend == "nccl":
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        torch.cuda.set_device(device)
        dist.init_process_group(
            backend, store=store, rank=rank, world_size=size, timeout=timeout, device_id=device
        )
    else:
        dist.init_process_group(backend, store=store, rank=rank, world_size=size, timeout=timeout)


def destroy_gradient_group() -> None:
    """Tear down the current gradient group (no-op when there is none)."""
    import torch.distributed as dist  # heavy: only where used
    global _store
    if dist.is_initialized():
        dist.destroy_process_group()
    _store = None


def _check_request(backend: str, device: torch.device) -> None:
    """Reject impossible backend/device pairs before any rank blocks."""
    import torch.distributed as dist  # heavy: only where used
    if backend not in BACKENDS:
        raise ValueError(f"unknown torch.distributed backend {backend!r}; use one of {BACKENDS}")
    if backend == "nccl" and device.type != "cuda":
        raise ValueError(f"backend 'nccl' needs a CUDA device, got {device}; use 'gloo' on CPU")
    if dist.is_initialized():
        raise RuntimeError(
            "a gradient group is already initialised in this process; "
            "call destroy_gradient_group() before creating another"
        )


def _store_host(hostnames: list[str]) -> str:
    """An address of rank 0 that every member of the group can connect to."""
    me = hostnames[0]
    others = [h for h in hostnames if h != me]
    if not others:
        return "127.0.0.1"
    try:
        # A UDP "connect" sends nothing; it only asks the kernel which local
        # address routes to the peer, which the peer can normally reach back.
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((others[0], 9))
            address = probe.getsockname()[0]
        if not address.startswith("127."):
            return address
    except OSError:
        pass
    return me
