"""Stands in for the ``hpcrl`` command of a job (``HPCRL_CMD="python rank_probe.py"``):
records what this rank sees of MPI and Slurm into ``$HPCRL_PROBE_DIR``, then runs hpcrl's
command line in this same process.

The record proves what the job's log cannot: that the ranks form one MPI world of the size
`hpcrl plan` gives (an MPI/PMI mismatch leaves every rank alone in a world of size 1), and
which ranks got GPUs.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def record() -> None:
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    info = {
        "rank": rank,
        "size": size,
        "rank_sum": comm.allreduce(rank),
        "node": os.environ.get("SLURMD_NODENAME"),
        "procid": os.environ.get("SLURM_PROCID"),
        "step": os.environ.get("SLURM_STEP_ID"),
        "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "restart": int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0),
        "argv": sys.argv[1:],
        "pid": os.getpid(),  # a test may kill this rank (the cluster's nodes share a machine)
    }
    out = Path(os.environ["HPCRL_PROBE_DIR"])
    out.mkdir(parents=True, exist_ok=True)
    (out / f"start{info['restart']}-rank{rank}.json").write_text(json.dumps(info))


if __name__ == "__main__":
    import faulthandler
    import signal

    faulthandler.register(signal.SIGUSR2, all_threads=True)  # `kill -USR2 PID`: a hung rank's stack
    if sys.argv[1:2] == ["train"]:  # not the batch shell's `hpcrl slurm launcher`
        record()
    from hpcrl.cli import main

    main(args=sys.argv[1:], prog_name="hpcrl")
