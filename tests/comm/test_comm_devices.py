"""Node-local rank detection and device choice, with fake environments."""

from __future__ import annotations

import pytest
import torch

from hpcrl.runtime.devices import node_local_rank, pick_device


@pytest.mark.parametrize(
    "environ, expected",
    [
        ({}, None),
        ({"SLURM_LOCALID": "3"}, 3),
        ({"OMPI_COMM_WORLD_LOCAL_RANK": "1"}, 1),
        ({"MPI_LOCALRANKID": "2"}, 2),
        ({"PMI_LOCAL_RANK": "5"}, 5),
        ({"PALS_LOCAL_RANKID": "6"}, 6),
        # Slurm wins over MPICH's and Cray's own variables (srun inside mpirun wrappers)
        ({"SLURM_LOCALID": "0", "MPI_LOCALRANKID": "7", "PMI_LOCAL_RANK": "7"}, 0),
        ({"OMPI_COMM_WORLD_LOCAL_RANK": "4", "PALS_LOCAL_RANKID": "9"}, 4),
        # Open MPI's mpiexec inside an allocation: its daemon's step gave every rank 0
        ({"SLURM_LOCALID": "0", "OMPI_COMM_WORLD_LOCAL_RANK": "2"}, 2),
        ({"SLURM_LOCALID": "", "MPI_LOCALRANKID": "1"}, 1),  # empty counts as unset
        ({"PMI_RANK": "3", "SLURM_PROCID": "3"}, None),  # global ranks are not local ranks
    ],
)
def test_node_local_rank(environ: dict[str, str], expected: int | None) -> None:
    assert node_local_rank(environ) == expected


@pytest.mark.parametrize("value", ["x", "-1", "1.5"])
def test_node_local_rank_rejects_garbage(value: str) -> None:
    with pytest.raises(ValueError, match="SLURM_LOCALID"):
        node_local_rank({"SLURM_LOCALID": value})


CPU = torch.device("cpu")


@pytest.mark.parametrize(
    "requested, local_rank, cuda, count, expected",
    [
        ("cpu", 3, True, 4, CPU),
        ("auto", 5, True, 4, torch.device("cuda", 1)),
        ("auto", None, True, 2, torch.device("cuda", 0)),
        ("auto", 2, False, 0, CPU),
        ("auto", 2, True, 0, CPU),
        ("cuda", 3, True, 2, torch.device("cuda", 1)),
        ("cuda:1", 0, True, 2, torch.device("cuda", 1)),
        (" CUDA:0 ", 7, True, 1, torch.device("cuda", 0)),
        ("auto", 0, True, 1, torch.device("cuda", 0)),  # one visible GPU per rank
    ],
)
def test_pick_device(
    requested: str, local_rank: int | None, cuda: bool, count: int, expected: torch.device
) -> None:
    assert pick_device(requested, local_rank, cuda, count) == expected


@pytest.mark.parametrize(
    "requested, local_rank, cuda, count, match",
    [
        ("cuda", 0, False, 0, "CUDA is not available"),
        ("cuda:0", 0, False, 0, "CUDA is not available"),
        ("cuda:2", 0, True, 2, "sees 2 CUDA device"),
        ("gpu", 0, True, 2, "'auto', 'cpu', 'cuda' or 'cuda:N'"),
        ("cuda:-1", 0, True, 2, "'auto', 'cpu', 'cuda' or 'cuda:N'"),
        ("auto", -1, True, 2, "local_rank"),
    ],
)
def test_pick_device_errors(
    requested: str, local_rank: int, cuda: bool, count: int, match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        pick_device(requested, local_rank, cuda, count)


def test_pick_device_defaults_to_torch() -> None:
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert pick_device("auto", 0).type == expected
