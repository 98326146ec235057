"""Ranks that end a job in the way a test names, through the mechanism every hpcrl rank
uses: the abort handler, and under Open MPI's ULFM the failure watch that ``train_mpi``
starts on every rank. The launcher's exit status is what the test reads.

usage: ``mpiexec -n N python exit_probe.py CASE``, CASE one of

* ``error``  rank 1 raises while rank 0 waits for it in a receive and the others sleep;
* ``last``   every rank but 0 dies by SIGKILL; then rank 0, the last live one, raises;
* ``alone``  (one rank) it raises.
"""
from __future__ import annotations

import os
import signal
import sys
import time

from hpcrl.comm import abort_job, install_abort_handler, world_comm
from hpcrl.comm.faults import FailureWatch, watches_for_revocation


def main(case: str) -> None:
    world = world_comm()
    rank = world.Get_rank()
    install_abort_handler(world, lambda: f"probe rank {rank}")
    if watches_for_revocation():  # as train_mpi does on every rank under ULFM
        FailureWatch(world, lambda r: False, lambda r: f"probe rank {r}",
                     lambda message: abort_job(world, message), None,
                     survives=False).start()
    world.Barrier()
    if case == "error":
        if rank == 1:
            raise RuntimeError("the probe failed on rank 1")
        if rank == 0:
            world.recv(source=1)  # never sent
        time.sleep(60)
    elif case == "last":
        if rank != 0:
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(2)  # the launcher learns of the deaths
        raise RuntimeError("the probe failed on the last live rank")
    elif case == "alone":
        raise RuntimeError("the probe failed alone")
    raise SystemExit(f"unknown case {case!r}")


if __name__ == "__main__":
    main(sys.argv[1])
