"""What a DD-PPO worker's per-step look for its peers' preemption notices costs, before and
after issue 55's fix, printed beside the CPU model (the cost model's ``notice_probe_s``).

- *per-peer tests* (before): a receive posted from every peer, and at every env step one
  ``Test`` for each unfinished peer, a Python loop over (p - 1) requests;
- *one probe* (now, :class:`~hpcrl.placement.wiring.peer_notices.PeerNotices`): one
  ``Iprobe`` from any peer a step, whatever p.

Both through hpcrl's MPI channel, with notices that never come (the common case: a worker
looks at every step once it has its minimum share, and a notice arrives once per peer).
Run on 2 ranks so that the probe goes through MPICH's shared memory and network modules
as in a job (rank 1 only waits, polling without spinning)::

    mpiexec -n 2 python benchmarks/notice_poll.py --peers 7 127 1023
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

import numpy as np
from machine import machine_line

TAG = 6  # hpcrl.exchange.protocol.TAG_DONE


def per_peer_step(channel: Any, comm_peer: int, peers: int, steps: int) -> float:
    """Seconds of one step of the old loop: a test of each of ``peers`` pending receives."""
    boxes = [np.zeros(1, np.int64) for _ in range(peers)]
    requests = [channel.irecv(box, comm_peer, TAG) for box in boxes]
    finished = [False] * peers
    started = time.perf_counter()
    for _ in range(steps):  # the loop of the old OwnEnvs.gather's should_stop
        for i, request in enumerate(requests):
            if not finished[i] and channel.test(request):
                finished[i] = True
    seconds = (time.perf_counter() - started) / steps
    for request in requests:
        channel.cancel(request)
    return seconds


def probe_step(channel: Any, peers: int, steps: int) -> float:
    """Seconds of one step of the new test: :meth:`PeerNotices.count` with none pending."""
    from hpcrl.placement.wiring.peer_notices import PeerNotices

    notices = PeerNotices(channel, peers, update=0)
    started = time.perf_counter()
    for _ in range(steps):
        notices.count()
    return (time.perf_counter() - started) / steps


def measure(peer_counts: list[int], steps: int, repeats: int) -> None:
    """Print the median per-step cost of both ways at each peer count (rank 0 measures)."""
    from mpi4py import MPI

    from hpcrl.comm.buffers import wait
    from hpcrl.comm.channel import MpiChannel

    world = MPI.COMM_WORLD
    comm = world.Dup() if world.size > 1 else MPI.COMM_SELF.Dup()
    if world.rank != 0:
        wait(world.Ibarrier())  # idle until rank 0 is done
        return
    channel = MpiChannel(comm)
    other = 1 if comm.size > 1 else 0
    print(f"{machine_line()}\nranks {world.size}, MPI: "
          f"{MPI.Get_library_version().splitlines()[0]}; load {os.getloadavg()[0]:.1f}")
    print("| peers | per-peer tests a step (before) | one probe a step (now) |")
    print("|---|---|---|")
    for peers in peer_counts:
        old = statistics.median(per_peer_step(channel, other, peers, steps)
                                for _ in range(repeats))
        new = statistics.median(probe_step(channel, peers, steps) for _ in range(repeats))
        print(f"| {peers} | {old * 1e6:.2f} us ({old / peers * 1e6:.2f} us a peer) | "
              f"{new * 1e6:.2f} us |", flush=True)
    if world.size > 1:
        wait(world.Ibarrier())


def main() -> None:
    """Parse the arguments and measure."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peers", nargs="+", type=int, default=[7, 127, 1023])
    parser.add_argument("--steps", type=int, default=128, help="Env steps of one rollout.")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    measure(args.peers, args.steps, args.repeats)


if __name__ == "__main__":
    main()
