"""What an Atari rollout costs to move between two ranks of one node: MPI messages against an
MPI-3 shared-memory window.

The rollout is the message hpcrl sends today (``examples/atari-ppo.yaml``: 8 envs x 128 steps
of uint8 ``[4, 84, 84]`` frames plus the float fields, one buffer, :class:`RolloutLayout`).

* **message**: rank 1 sends the buffer with ``Isend``, rank 0 receives it into its own buffer
  (what a collector and its learner do now; MPICH moves it through its shared-memory
  channel, copying it twice: into the channel and out of it);
* **shared window**: both ranks map one window (``Comm.Split_type(COMM_TYPE_SHARED)`` and
  ``Win.Allocate_shared``); rank 1 has collected the rollout into it and sends an 8-byte
  notice, rank 0 reads it in place (no copy at all) and sends the notice back when done;
* **shared window + copy**: the same, with rank 0 copying the rollout out of the window
  (what a learner that must free the slot at once would do).

Per transfer it prints the bytes, the median time and the GB/s, rank 0's time only (the
writer's fill of the buffer is not counted in any of the three).

    mpiexec -n 2 python benchmarks/rollout_transfer.py [--repeats 30]
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from mpi4py import MPI

from hpcrl.core.rollout import RolloutLayout
from machine import machine_line


def rollout_words() -> int:
    layout = RolloutLayout(128, 8, (4, 84, 84), (), "uint8")
    return layout.data_size


def by_message(comm: MPI.Comm, words: int, repeats: int) -> list[float]:
    buf = np.ones(words, np.float32)
    times = []
    for _ in range(repeats):
        comm.Barrier()
        start = time.perf_counter()
        if comm.rank == 1:
            comm.Send(buf, dest=0, tag=1)
        else:
            comm.Recv(buf, source=1, tag=1)
            times.append(time.perf_counter() - start)
    return times


def by_window(comm: MPI.Comm, words: int, repeats: int, copy_out: bool) -> list[float]:
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    nbytes = words * 4
    win = MPI.Win.Allocate_shared(nbytes if node.rank == 1 else 0, 4, comm=node)
    mem, _ = win.Shared_query(1)
    shared = np.ndarray((words,), np.float32, buffer=mem)
    source = np.ones(words, np.float32)
    own = np.empty(words, np.float32)
    notice = np.zeros(1, np.int64)
    times = []
    for i in range(repeats):
        if node.rank == 1:  # the collector collects straight into the window: not timed,
            shared[:] = source  # as the message's buffer is filled before it is sent
        node.Barrier()
        start = time.perf_counter()
        if node.rank == 1:
            notice[0] = i
            node.Send(notice, dest=0, tag=2)
            node.Recv(notice, source=0, tag=3)
        else:
            node.Recv(notice, source=1, tag=2)
            if copy_out:
                own[:] = shared
            else:
                float(shared[:: 4096].sum())  # read in place (the learner trains on it)
            node.Send(notice, dest=1, tag=3)
            times.append(time.perf_counter() - start)
    win.Free()
    node.Free()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    if comm.size != 2:
        raise SystemExit("run it on 2 ranks of one node: mpiexec -n 2 python "
                         "benchmarks/rollout_transfer.py")
    words = rollout_words()
    rows = [("message (Send/Recv)", by_message(comm, words, args.repeats)),
            ("shared window, read in place", by_window(comm, words, args.repeats, False)),
            ("shared window, copied out", by_window(comm, words, args.repeats, True))]
    if comm.rank == 0:
        print(machine_line())
        mb = words * 4 / 1e6
        print(f"one Atari rollout (8 envs x 128 steps of uint8 [4, 84, 84]): {mb:.2f} MB, "
              f"2 ranks of one node, median of {args.repeats}")
        base = statistics.median(rows[0][1])
        for name, times in rows:
            t = statistics.median(times)
            rate = ("   no copy" if "in place" in name else f"{mb / 1e3 / t:6.2f} GB/s")
            print(f"{name:>30}: {t * 1e3:8.2f} ms  {rate}  ({base / t:.2f}x the message)")
        steps = 8 * 128
        print(f"per env step: message {base / steps * 1e6:.2f} us, shared window "
              f"{statistics.median(rows[1][1]) / steps * 1e6:.2f} us")


if __name__ == "__main__":
    main()
