"""In-place all-reduce of flat gradient / statistics tensors over a rank group.

``Allreducer`` hides which transport does the work: MPI on the tensor's
numpy view (much lower latency than gloo for CPU tensors up to ~1M floats
on an idle node), gloo or nccl through torch.distributed, or nothing at all
for a single rank.
``make_allreducer`` picks one from a config string.
"""

from __future__ import annotations

import statistics
import time
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

import numpy as np
import torch

if TYPE_CHECKING:  # annotations only: the import itself is heavy
    import torch.distributed as dist

import socket

from hpcrl.comm._mpi import Comm, mpi
from hpcrl.comm.rendezvous import destroy_gradient_group, init_gradient_group

KINDS = ("auto", "nccl", "gloo", "mpi")


class Allreducer(ABC):
    """Sums or averages a tensor in place over every rank of a group."""

    name: str  # 'local', 'mpi', 'gloo' or 'nccl', for logs

    @property
    @abstractmethod
    def size(self) -> int:
        """Number of ranks taking part (the divisor of ``average_``)."""

    @abstractmethod
    def sum_(self, t: torch.Tensor) -> torch.Tensor:
        """Replace ``t`` by its element-wise sum over the group; return ``t``.

        Used for cross-rank statistics such as advantage-normalisation moments.
        """

    def average_(self, flat: torch.Tensor) -> torch.Tensor:
        """Replace ``flat`` by its element-wise mean over the group; return it."""
        if not flat.is_floating_point():
            raise TypeError(f"average_ needs a floating-point tensor, got {flat.dtype}")
        self.sum_(flat)
        if self.size > 1:
            flat.div_(self.size)
        return flat

    def close(self) -> None:  # noqa: B027  (most allreducers own nothing: a no-op hook)
        """Release what the allreducer owns (its process group, if any)."""


def sum_host_array_(allreducer: Allreducer, array: np.ndarray,
                    device: torch.device) -> np.ndarray:
    """Sum a host array (normaliser moments, made from host rollouts) over the group, on
    the learners' ``device``: in place on a CPU learner; through the device on a GPU one,
    since NCCL reduces device tensors only. Returns ``array``."""
    tensor = torch.from_numpy(array)
    if torch.device(device).type == "cpu":
        allreducer.sum_(tensor)
        return array
    on_device = tensor.to(device)
    allreducer.sum_(on_device)
    array[...] = on_device.cpu().numpy()
    return array


class LocalAllreducer(Allreducer):
    """The group of one: sum and average are the identity."""

    name = "local"

    @property
    def size(self) -> int:
        """1: the group is this rank alone."""
        return 1

    def sum_(self, t: torch.Tensor) -> torch.Tensor:
        """``t`` unchanged: the sum over one rank."""
        return t


class MpiAllreducer(Allreducer):
    """MPI_Allreduce(IN_PLACE, SUM) on the tensor's numpy view, no pickling.

    A CPU tensor is reduced where it lies. A tensor on an accelerator goes through a host
    stage (a pinned buffer kept per size and dtype): copied out, reduced, copied back. That
    round trip is what choosing the MPI backend for GPU learners costs; ``auto`` picks NCCL
    there and never stages.
    """

    name = "mpi"

    def __init__(self, comm: Comm) -> None:
        self._comm = comm
        self._size = comm.Get_size()
        self._stages: dict[tuple[int, torch.dtype], torch.Tensor] = {}

    @property
    def size(self) -> int:
        """The number of ranks in the communicator."""
        return self._size

    def _stage(self, t: torch.Tensor) -> torch.Tensor:
        key = (t.numel(), t.dtype)
        if key not in self._stages:
            self._stages[key] = torch.empty(t.numel(), dtype=t.dtype, pin_memory=True)
        return self._stages[key]

    def sum_(self, t: torch.Tensor) -> torch.Tensor:
        """Sum ``t`` over the communicator in place: a CPU tensor on its numpy view, one on an
        accelerator through the pinned host stage (it must be contiguous). Returns ``t``."""
        if t.device.type == "meta":
            raise ValueError("MpiAllreducer cannot reduce a tensor on the meta device (it "
                             "holds no data)")
        if t.device.type == "cpu":
            view = _numpy_view(t)
            if self._size > 1:
                self._comm.Allreduce(mpi().IN_PLACE, view, op=mpi().SUM)
            return t
        if not t.is_contiguous():
            raise ValueError("MpiAllreducer needs a contiguous tensor; pass a flat buffer")
        if self._size > 1:
            stage = self._stage(t)
            stage.copy_(t.reshape(-1))
            self._comm.Allreduce(mpi().IN_PLACE, _numpy_view(stage), op=mpi().SUM)
            t.reshape(-1).copy_(stage)
        return t


class TorchDistAllreducer(Allreducer):
    """torch.distributed all_reduce over ``group`` (gloo on CPU, nccl on CUDA).

    With ``owns_group`` the allreducer destroys the gradient group on
    ``close()``; ``make_allreducer`` hands out owning instances.
    """

    def __init__(self, group: dist.ProcessGroup, backend: str, *, owns_group: bool = False) -> None:
        import torch.distributed as dist  # heavy: only where used
        backend = backend.lower()
        if backend not in ("gloo", "nccl"):
            raise ValueError(f"backend must be 'gloo' or 'nccl', got {backend!r}")
        self._group = group
        self._backend = backend
        self.name = backend
        self._size = dist.get_world_size(group)
        self._owns_group = owns_group

    @property
    def size(self) -> int:
        """The number of ranks in the process group."""
        return self._size

    def sum_(self, t: torch.Tensor) -> torch.Tensor:
        """Sum ``t`` over the group in place with ``dist.all_reduce`` (contiguous; CUDA for
        nccl). Returns ``t``."""
        import torch.distributed as dist  # heavy: only where used
        if self._backend == "nccl" and t.device.type != "cuda":
            raise ValueError(f"the nccl allreducer needs CUDA tensors, got one on {t.device}")
        if not t.is_contiguous():
            raise ValueError("all-reduce needs a contiguous tensor; pass a flat buffer")
        dist.all_reduce(t, op=dist.ReduceOp.SUM, group=self._group)
        return t

    def close(self) -> None:
        """Destroy the gradient group if this allreducer owns it (once; later calls do nothing)."""
        if self._owns_group:
            self._owns_group = False
            destroy_gradient_group()


def _numpy_view(t: torch.Tensor) -> np.ndarray:
    """The numpy array sharing the CPU tensor ``t``'s memory, or a clear error why it cannot."""
    if not t.is_contiguous():
        raise ValueError("MpiAllreducer needs a contiguous tensor; pass a flat buffer")
    try:
        return t.detach().numpy()
    except TypeError as exc:  # e.g. bfloat16 has no numpy dtype
        raise TypeError(f"MpiAllreducer cannot reduce dtype {t.dtype}: {exc}") from exc


def time_allreduce(
    allreducer: Allreducer,
    comm: Comm,
    numel: int,
    *,
    iters: int = 5,
    warmup: int = 2,
    device: torch.device | str = "cpu",
) -> float:
    """Median seconds per ``sum_`` of ``numel`` float32s, as seen on this rank.

    Collective over ``comm``, whose ranks must be those of the allreducer's
    group; a barrier precedes each call so that every call starts together.
    """
    buf = torch.zeros(numel, dtype=torch.float32, device=device)
    for _ in range(warmup):
        allreducer.sum_(buf)
    times = []
    for _ in range(iters):
        comm.Barrier()
        start = time.perf_counter()
        allreducer.sum_(buf)
        if buf.device.type == "cuda":
            torch.cuda.synchronize(buf.device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure_cpu_allreducers(comm: Comm, numel: int, *, iters: int = 5) -> dict[str, float]:
    """Seconds per all-reduce of ``numel`` floats for 'mpi' and 'gloo'.

    Collective over ``comm``. Returns rank 0's measurement on every rank, so
    that a choice made from it is the same everywhere. Creates and destroys
    a temporary gloo gradient group.
    """
    timings = {"mpi": time_allreduce(MpiAllreducer(comm), comm, numel, iters=iters)}
    gloo = TorchDistAllreducer(init_gradient_group(comm, "gloo", "cpu"), "gloo", owns_group=True)
    try:
        timings["gloo"] = time_allreduce(gloo, comm, numel, iters=iters)
    finally:
        gloo.close()
    return comm.bcast(timings, root=0)


def shared_gpu_problem(comm: Comm, device: torch.device) -> str | None:
    """Why NCCL cannot all-reduce over ``comm`` from these devices, or None.

    NCCL needs one GPU per rank: two ranks of the group on the same GPU of the same node
    make ``ncclCommInitRank`` fail (or hang) deep inside the first collective. Collective
    over ``comm``: every rank gathers every rank's (node, device) and answers the same.
    """
    index = device.index if device.index is not None else 0
    placed = comm.allgather((socket.gethostname(), index))
    seen: dict[tuple[str, int], list[int]] = {}
    for rank, where in enumerate(placed):
        seen.setdefault(tuple(where), []).append(rank)
    shared = {where: ranks for where, ranks in seen.items() if len(ranks) > 1}
    if not shared:
        return None
    (node, gpu), ranks = next(iter(shared.items()))
    return (f"NCCL needs one GPU per gradient rank, but gradient ranks {ranks} share "
            f"cuda:{gpu} on node {node}; set scheme.allreduce=gloo (it all-reduces CUDA "
            f"tensors too), or start at most as many gradient ranks per node as it has GPUs")


def make_allreducer(
    kind: str,
    comm: Comm,
    device: torch.device | str,
    numel: int,
    *,
    iters: int = 5,
) -> Allreducer:
    """The allreducer for ``kind`` ('auto'|'nccl'|'gloo'|'mpi') over ``comm``.

    Collective over ``comm`` (the gradient ranks). 'auto' is nccl on a CUDA
    device; on CPU it times MPI and gloo on ``numel`` floats and keeps the
    faster, by rank 0's measurement. A single-rank ``comm`` always gets a
    LocalAllreducer, once the request has been checked. Call ``close()``
    on the result when done.
    """
    kind = kind.lower()
    device = torch.device(device)
    if kind not in KINDS:
        raise ValueError(f"unknown allreducer {kind!r}; use one of {KINDS}")
    if kind == "nccl" and device.type != "cuda":
        raise ValueError(
            f"allreducer 'nccl' needs a CUDA device but the device is {device}: "
            "use allreducer 'auto', 'gloo' or 'mpi' for CPU training, or a 'cuda' device"
        )
    if numel <= 0:
        raise ValueError(f"numel must be positive, got {numel}")
    if comm.Get_size() == 1:
        return LocalAllreducer()
    if kind == "auto":
        if device.type == "cuda":
            kind = "nccl"
        else:
            timings = measure_cpu_allreducers(comm, numel, iters=iters)
            kind = min(timings, key=timings.__getitem__)
    if kind == "nccl":
        problem = shared_gpu_problem(comm, device)
        if problem is not None:
            raise ValueError(problem)
    if kind == "mpi":
        return MpiAllreducer(comm)
    group = init_gradient_group(comm, kind, device)
    return TorchDistAllreducer(group, kind, owns_group=True)
