"""All-reduce implementations: values against numpy, backends against each other."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hpcrl.comm import (
    LocalAllreducer,
    MpiAllreducer,
    TorchDistAllreducer,
    destroy_gradient_group,
    init_gradient_group,
    make_allreducer,
    measure_cpu_allreducers,
    world_comm,
)

NUMEL = 1000


def rank_data(rank: int, numel: int = NUMEL, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Different, reproducible data on each rank."""
    gen = torch.Generator().manual_seed(1234 + rank)
    return torch.randn(numel, generator=gen, dtype=dtype)


def reference(size: int, reduce: str, dtype: torch.dtype = torch.float32) -> np.ndarray:
    stacked = np.stack([rank_data(r, dtype=dtype).numpy() for r in range(size)])
    return stacked.mean(axis=0) if reduce == "mean" else stacked.sum(axis=0)


@pytest.mark.parallel([2, 3])
@pytest.mark.timeout(60)
def test_mpi_average_and_sum_match_numpy() -> None:
    comm = world_comm()
    reducer = MpiAllreducer(comm)
    flat = rank_data(comm.rank)
    storage = flat.data_ptr()
    out = reducer.average_(flat)

    moments = rank_data(comm.rank, dtype=torch.float64)
    stats = torch.tensor([moments.sum(), (moments**2).sum(), float(moments.numel())],
                         dtype=torch.float64)
    reducer.sum_(stats)

    assert reducer.size == comm.size
    assert out is flat and flat.data_ptr() == storage  # in place
    np.testing.assert_allclose(flat.numpy(), reference(comm.size, "mean"), rtol=1e-5, atol=1e-6)
    everything = np.concatenate([rank_data(r, dtype=torch.float64).numpy()
                                 for r in range(comm.size)])
    np.testing.assert_allclose(
        stats.numpy(), [everything.sum(), (everything**2).sum(), everything.size], rtol=1e-10
    )


@pytest.mark.parallel([2, 3])
@pytest.mark.timeout(60)
def test_gloo_through_rendezvous_matches_mpi() -> None:
    comm = world_comm()
    via_mpi = MpiAllreducer(comm).average_(rank_data(comm.rank))
    group = init_gradient_group(comm, "gloo", "cpu")
    try:
        gloo = TorchDistAllreducer(group, "gloo")
        via_gloo = gloo.average_(rank_data(comm.rank))
        summed = gloo.sum_(rank_data(comm.rank))
        size = gloo.size
    finally:
        destroy_gradient_group()
    assert size == comm.size
    np.testing.assert_allclose(via_gloo.numpy(), via_mpi.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(summed.numpy(), reference(comm.size, "sum"), rtol=1e-5, atol=1e-5)


@pytest.mark.parallel(2)
@pytest.mark.timeout(60)
def test_successive_groups_and_teardown() -> None:
    comm = world_comm()
    results = []
    for round_ in range(2):
        reducer = make_allreducer("gloo", comm, "cpu", NUMEL)
        assert isinstance(reducer, TorchDistAllreducer) and reducer.name == "gloo"
        t = torch.full((4,), float(comm.rank + round_))
        results.append(reducer.sum_(t).tolist())
        if round_ == 0:
            with pytest.raises(RuntimeError, match="already initialised"):
                init_gradient_group(comm, "gloo", "cpu")
        reducer.close()
        reducer.close()  # idempotent
    assert torch.distributed.is_initialized() is False
    assert results == [[1.0] * 4, [3.0] * 4]


@pytest.mark.parallel(2)
@pytest.mark.timeout(60)
def test_auto_choice_is_collective() -> None:
    comm = world_comm()
    timings = measure_cpu_allreducers(comm, 10_000, iters=3)
    reducer = make_allreducer("auto", comm, "cpu", 10_000, iters=3)
    name = reducer.name
    t = reducer.average_(rank_data(comm.rank))
    reducer.close()
    names = comm.allgather(name)
    all_timings = comm.allgather(timings)
    assert set(timings) == {"mpi", "gloo"} and all(v > 0 for v in timings.values())
    assert all(t_ == all_timings[0] for t_ in all_timings)
    assert len(set(names)) == 1 and names[0] in ("mpi", "gloo")
    np.testing.assert_allclose(t.numpy(), reference(comm.size, "mean"), rtol=1e-5, atol=1e-6)


# ---- single-process checks (run in the parent pytest process) -------------


def test_single_rank_gets_local_allreducer() -> None:
    comm = world_comm()
    assert comm.Get_size() == 1
    for kind in ("auto", "gloo", "mpi"):
        reducer = make_allreducer(kind, comm, "cpu", NUMEL)
        assert isinstance(reducer, LocalAllreducer)
    t = torch.arange(3.0)
    assert LocalAllreducer().average_(t) is t and t.tolist() == [0.0, 1.0, 2.0]
    assert MpiAllreducer(comm).average_(t).tolist() == [0.0, 1.0, 2.0]


def test_single_rank_gloo_group() -> None:
    group = init_gradient_group(world_comm(), "gloo", "cpu")
    try:
        t = torch.arange(4.0)
        TorchDistAllreducer(group, "gloo").average_(t)
    finally:
        destroy_gradient_group()
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_nccl_on_cpu_is_an_error_naming_the_fix() -> None:
    with pytest.raises(ValueError, match="'nccl' needs a CUDA device.*'gloo' or 'mpi'"):
        make_allreducer("nccl", world_comm(), "cpu", NUMEL)
    with pytest.raises(ValueError, match="'nccl' needs a CUDA device"):
        init_gradient_group(world_comm(), "nccl", "cpu")


def test_bad_requests() -> None:
    comm = world_comm()
    with pytest.raises(ValueError, match="unknown allreducer"):
        make_allreducer("ring", comm, "cpu", NUMEL)
    with pytest.raises(ValueError, match="numel"):
        make_allreducer("auto", comm, "cpu", 0)
    with pytest.raises(ValueError, match="unknown torch.distributed backend"):
        init_gradient_group(comm, "mpi", "cpu")


def test_mpi_allreducer_rejects_what_it_cannot_view() -> None:
    reducer = MpiAllreducer(world_comm())
    with pytest.raises(ValueError, match="meta device"):
        reducer.sum_(torch.empty(3, device="meta"))
    with pytest.raises(ValueError, match="contiguous"):
        reducer.sum_(torch.zeros(4, 4).t())
    with pytest.raises(TypeError, match="bfloat16"):
        reducer.sum_(torch.zeros(3, dtype=torch.bfloat16))
    with pytest.raises(TypeError, match="floating-point"):
        reducer.average_(torch.zeros(3, dtype=torch.int64))


class _Placed:
    """A stand-in communicator whose allgather returns given (node, gpu) placements."""

    def __init__(self, placements: list[tuple[str, int]]) -> None:
        self.placements = placements

    def allgather(self, mine: object) -> list[tuple[str, int]]:
        return self.placements


def test_two_gradient_ranks_on_one_gpu_are_refused_for_nccl_naming_ranks_and_fix() -> None:
    from hpcrl.comm.allreduce import shared_gpu_problem

    one_each = _Placed([("n1", 0), ("n1", 1), ("n2", 0)])
    assert shared_gpu_problem(one_each, torch.device("cuda", 0)) is None
    shared = shared_gpu_problem(_Placed([("n1", 0), ("n1", 1), ("n1", 0)]),
                                torch.device("cuda", 0))
    assert "gradient ranks [0, 2] share cuda:0 on node n1" in shared
    assert "scheme.allreduce=gloo" in shared
