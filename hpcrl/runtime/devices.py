"""Choose this rank's torch device from the launcher's node-local rank.

No MPI here: the launcher already tells each process its rank on the node
through the environment, which is all GPU assignment needs.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

import torch

# Node-local rank variables, in the order they are consulted, with who sets them.
LOCAL_RANK_VARIABLES: tuple[tuple[str, str], ...] = (
    ("SLURM_LOCALID", "Slurm srun"),
    ("OMPI_COMM_WORLD_LOCAL_RANK", "Open MPI mpirun/mpiexec (and srun with PMIx for Open MPI)"),
    ("MPI_LOCALRANKID", "MPICH Hydra mpiexec and Intel MPI"),
    ("PMI_LOCAL_RANK", "HPE Cray PMI / PALS mpiexec"),
    ("PALS_LOCAL_RANKID", "HPE Cray PALS mpiexec"),
)

_CUDA_INDEX = re.compile(r"cuda:(\d+)")


def node_local_rank(environ: Mapping[str, str] = os.environ) -> int | None:
    """This process's rank among the job's processes on its node, or None.

    Taken from the first of LOCAL_RANK_VARIABLES that is set; None when no
    known launcher started the process (e.g. a plain ``python`` run).
    """
    for name, _launcher in LOCAL_RANK_VARIABLES:
        value = environ.get(name)
        if value is None or value.strip() == "":
            continue
        try:
            rank = int(value)
        except ValueError:
            raise ValueError(f"environment variable {name}={value!r} is not an integer") from None
        if rank < 0:
            raise ValueError(f"environment variable {name}={value!r} is negative")
        return rank
    return None


def pick_device(
    requested: str,
    local_rank: int | None,
    cuda_available: bool | None = None,
    device_count: int | None = None,
) -> torch.device:
    """The device for ``requested`` ('auto', 'cpu', 'cuda' or 'cuda:N').

    'auto' (and plain 'cuda') spread the ranks of a node over its GPUs as
    cuda:(local_rank % device_count); 'auto' falls back to the CPU without
    CUDA. ``local_rank`` None counts as 0. ``cuda_available`` and
    ``device_count`` default to what torch reports; tests pass them in.
    """
    if cuda_available is None:
        cuda_available = torch.cuda.is_available()
    if device_count is None:
        device_count = torch.cuda.device_count() if cuda_available else 0
    if local_rank is not None and local_rank < 0:
        raise ValueError(f"local_rank must be >= 0, got {local_rank}")
    rank = local_rank or 0
    has_gpu = cuda_available and device_count > 0

    request = requested.strip().lower()
    if request == "cpu":
        return torch.device("cpu")
    if request == "auto":
        return torch.device("cuda", rank % device_count) if has_gpu else torch.device("cpu")
    if request == "cuda":
        if not has_gpu:
            raise ValueError(_no_cuda_message(requested))
        return torch.device("cuda", rank % device_count)
    match = _CUDA_INDEX.fullmatch(request)
    if match is None:
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {requested!r}")
    if not has_gpu:
        raise ValueError(_no_cuda_message(requested))
    index = int(match.group(1))
    if index >= device_count:
        raise ValueError(
            f"device {requested!r} does not exist: this process sees {device_count} CUDA "
            f"device(s) (check CUDA_VISIBLE_DEVICES / the job's GPU request), "
            f"or use 'auto' to spread ranks over the visible GPUs"
        )
    return torch.device("cuda", index)


def _no_cuda_message(requested: str) -> str:
    return (
        f"device {requested!r} requested but CUDA is not available to this process "
        "(no GPU visible or a CPU-only torch build); use 'cpu' or 'auto'"
    )
