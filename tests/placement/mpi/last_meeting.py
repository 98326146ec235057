"""A job's last meeting after a lost rank, on real Open MPI ranks (run by
test_mpi_lost_collectors.py under ``mpiexec --with-ft ulfm -n 3``).

Rank 2 dies at once; rank 1 meets at once and then leaves with the stop status 3, as a
collector of a stopped job does; rank 0 is late (writing its checkpoint, say) and speaks
only after its own part of the meeting. The launcher may end every rank once one exits
non-zero, so rank 0's words arrive only if no rank leaves the meeting before rank 0 came."""
import os
import signal
import sys
import time

from mpi4py import MPI

from hpcrl.comm import finish_world

world = MPI.COMM_WORLD
rank = world.Get_rank()
if rank == 2:
    os.kill(os.getpid(), signal.SIGKILL)
if rank == 0:
    time.sleep(float(sys.argv[1]))
    print("rank 0: my last words", file=sys.stderr, flush=True)
finish_world(world, [], survives=True)
print(f"rank {rank}: met", file=sys.stderr, flush=True)
sys.stderr.flush()
os._exit(3 if rank == 1 else 0)
