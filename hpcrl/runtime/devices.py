"""Choose this rank's torch device from the launcher's node-local rank.

No MPI here: the launcher already tells each process its rank on the node
through the environment, which is all GPU assignment needs.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

import torch

from hpcrl.errors import ExplainedError

# Node-local rank variables, in the order they are consulted, with who sets them.
# Open MPI's first: its mpiexec inside a Slurm allocation (the async template on Open MPI)
# starts a node's ranks from one daemon, whose srun step (or the batch step) left them all
# SLURM_LOCALID=0; under srun with PMIx both are set and agree
LOCAL_RANK_VARIABLES: tuple[tuple[str, str], ...] = (
    ("OMPI_COMM_WORLD_LOCAL_RANK", "Open MPI mpirun/mpiexec (and srun with PMIx for Open MPI)"),
    ("SLURM_LOCALID", "Slurm srun"),
    ("MPI_LOCALRANKID", "MPICH Hydra mpiexec and Intel MPI"),
    ("PMI_LOCAL_RANK", "HPE Cray PMI / PALS mpiexec"),
    ("PALS_LOCAL_RANKID", "HPE Cray PALS mpiexec"),
)

_CUDA_INDEX = re.compile(r"cuda:(\d+)")


class DeviceError(ExplainedError, ValueError):
    """A device that this process cannot use (no GPU, a missing index, a bad name); the
    message names the option or config key that asked for it and the fix."""


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
    key: str = "train.device",
) -> torch.device:
    """The device for ``requested`` ('auto', 'cpu', 'cuda' or 'cuda:N').

    'auto' (and plain 'cuda') spread the ranks of a node over its GPUs as
    cuda:(local_rank % device_count); 'auto' falls back to the CPU without
    CUDA. ``local_rank`` None counts as 0. ``cuda_available`` and
    ``device_count`` default to what torch reports; tests pass them in.
    A device this process cannot use is a :class:`DeviceError` naming ``key``
    (the config key or CLI option that asked for it) and the fix.
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
            raise DeviceError(_no_cuda_message(requested, key))
        return torch.device("cuda", rank % device_count)
    match = _CUDA_INDEX.fullmatch(request)
    if match is None:
        raise DeviceError(f"{_named(key)} must be 'auto', 'cpu', 'cuda' or 'cuda:N', got "
                          f"{requested!r}")
    if not has_gpu:
        raise DeviceError(_no_cuda_message(requested, key))
    index = int(match.group(1))
    if index >= device_count:
        raise DeviceError(
            f"{_named(key)} asks for {requested!r}, which does not exist: this process sees "
            f"{device_count} CUDA device(s) (check CUDA_VISIBLE_DEVICES / the job's GPU "
            f"request), or use 'auto' to spread ranks over the visible GPUs"
        )
    return torch.device("cuda", index)


def _named(key: str) -> str:
    """``key`` as a message names it: a CLI option as it is, a config key as one."""
    return key if key.startswith("-") else f"config key '{key}'"


def _no_cuda_message(requested: str, key: str) -> str:
    fix = f"{key} cpu or auto" if key.startswith("-") else f"{key}=cpu or auto"
    return (
        f"{_named(key)} asks for {requested!r}, but CUDA is not available to this process "
        f"(no GPU visible, or a CPU-only torch build: torch {torch.__version__}); use {fix}"
    )
