"""All-reduce latency of MPI (numpy view) vs gloo, per call, by model size.

Run from the repository root under MPI, for example::

    OMP_NUM_THREADS=1 mpiexec -n 2 python benchmarks/allreduce.py
    OMP_NUM_THREADS=1 mpiexec -n 4 python benchmarks/allreduce.py --sizes 1e3 1e5 1e7

Every size is reduced by both transports over all ranks; rank 0 prints the
median seconds per call it saw and the gloo/MPI ratio, which is what
``make_allreducer('auto', ...)`` bases its choice on.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

try:
    import hpcrl.comm  # noqa: F401
except ImportError:  # running from a checkout without the package installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from machine import machine_line

from hpcrl.comm import (  # noqa: E402
    MpiAllreducer,
    TorchDistAllreducer,
    init_gradient_group,
    time_allreduce,
    world_comm,
)

DEFAULT_SIZES = ("1e3", "1e4", "1e5", "1e6")


def iterations_for(numel: int, budget_floats: float = 2e7) -> int:
    """Enough calls for a stable median, without spending long on big buffers."""
    return max(10, min(200, int(budget_floats / numel)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=list(DEFAULT_SIZES),
                        help="numbers of float32s to reduce (e.g. 1e3 250000)")
    parser.add_argument("--iters", type=int, default=None,
                        help="timed calls per size (default: 10..200 by size)")
    args = parser.parse_args(argv)
    sizes = [int(float(s)) for s in args.sizes]

    comm = world_comm()
    if comm.Get_size() < 2:
        print("run under mpiexec -n 2 (or more): one rank has nothing to reduce", file=sys.stderr)
        return 2
    mpi = MpiAllreducer(comm)
    gloo = TorchDistAllreducer(init_gradient_group(comm, "gloo", "cpu"), "gloo", owns_group=True)
    rows = []
    try:
        for numel in sizes:
            iters = args.iters or iterations_for(numel)
            t_mpi = time_allreduce(mpi, comm, numel, iters=iters, warmup=3)
            t_gloo = time_allreduce(gloo, comm, numel, iters=iters, warmup=3)
            rows.append((numel, iters, t_mpi, t_gloo))
    finally:
        gloo.close()

    if comm.Get_rank() == 0:
        print(machine_line())
        print(f"all-reduce (sum, float32) over {comm.Get_size()} ranks; median time per call")
        print(f"{'floats':>10} {'MB':>7} {'iters':>5} {'mpi [us]':>10} {'gloo [us]':>10} "
              f"{'gloo/mpi':>9}  faster")
        for numel, iters, t_mpi, t_gloo in rows:
            print(f"{numel:>10.0e} {numel * 4 / 1e6:>7.3f} {iters:>5d} {t_mpi * 1e6:>10.1f} "
                  f"{t_gloo * 1e6:>10.1f} {t_gloo / t_mpi:>9.1f}  "
                  f"{'mpi' if t_mpi <= t_gloo else 'gloo'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
