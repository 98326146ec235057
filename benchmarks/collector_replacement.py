"""How long a lost collector rank takes to come back, two ways, under Open MPI's ULFM.

A job that survives a lost collector (``mpiexec --with-ft ulfm``) can bring one back while it
runs. This measures, in a job that has already lost a rank (rank 1 is SIGKILLed first, so
every figure is taken where ULFM has a failure to carry), the time from rank 0's decision
to the new collector's first rollout in rank 0's hands, with the new collector's envs
built, the newest weights received and one rollout of ``env.num_envs`` CartPole envs x
``algo.num_steps`` steps collected:

* **spare**: a rank started with the job (rank 2, idle until then: it imported hpcrl and
  torch at start) is told which collector it now is;
* **spawn**: rank 0 starts a new process with ``MPI_Comm_spawn`` (over ``MPI_COMM_SELF``:
  the cheapest spawn there is) and merges the intercommunicator into one with it
  (``MPI_Intercomm_merge``); the child starts Python, imports hpcrl and torch, joins, and
  does what the spare does. (A child that must talk to learners other than rank 0 needs
  every live rank in a collective shrink, spawn, merge and split of the job's communicator
  on top of this.)

    mpiexec --with-ft ulfm --oversubscribe -n 3 python benchmarks/collector_replacement.py

Each way runs ``--repeats`` times; the median and the range are printed, with the machine.
"""
from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import time

import mpi4py

mpi4py.rc.thread_level = "multiple"
from mpi4py import MPI  # noqa: E402

from hpcrl.algorithms.demo_replay import collector_envs  # noqa: E402
from hpcrl.build import env_groups, env_spaces, make_actor, rollout_layout  # noqa: E402
from hpcrl.collection.collector import rollout_collector  # noqa: E402
from hpcrl.config import from_dict  # noqa: E402
from hpcrl.exchange.messages import Weights  # noqa: E402

SETS = ["env.num_envs=4", "algo.num_steps=64", "algo.ppo.minibatch_size=64"]
ASSIGN, WEIGHTS, PARAMS, READY = 60, 61, 62, 63


def become_collector(comm: MPI.Comm, incarnation: int) -> None:
    """What a new collector does before its first rollout reaches rank 0 of ``comm``: build
    its envs and actor, take the newest weights, collect one rollout and send its header."""
    cfg = from_dict({}, SETS)
    spaces = env_spaces(cfg)
    actor = make_actor(cfg, spaces)
    envs = collector_envs(cfg.env, cfg.algo, 0, cfg.env.num_envs,
                          env_groups(cfg, remote=False))
    collector = rollout_collector(envs, actor, cfg.env, cfg.algo.gamma, cfg.seed,
                                  incarnation=incarnation)
    weights = Weights.empty_like(actor)
    comm.Recv(weights.header.data, source=0, tag=WEIGHTS)
    comm.Recv(weights.params, source=0, tag=PARAMS)
    collector.load_weights(weights)
    rollout = rollout_layout(cfg, spaces, cfg.env.num_envs).new()
    collector.collect(rollout)
    comm.Send(rollout.header, dest=0, tag=READY)
    envs.close()


def send_weights_and_wait(comm: MPI.Comm, dest: int, weights: Weights, header: object) -> None:
    """Rank 0's side: the newest weights to ``dest``, then its first rollout's header."""
    comm.Send(weights.header.data, dest=dest, tag=WEIGHTS)
    comm.Send(weights.params, dest=dest, tag=PARAMS)
    comm.Recv(header, source=dest, tag=READY)


def child() -> None:
    """A spawned collector: join rank 0, become a collector, leave."""
    parent = MPI.Comm.Get_parent()
    merged = parent.Merge(high=True)
    become_collector(merged, incarnation=1)
    merged.Free()
    parent.Disconnect()


def report(name: str, times: list[float]) -> None:
    """One line: the median seconds of one way, and their range."""
    print(f"{name:24s} median {statistics.median(times):6.2f} s  (min {min(times):.2f}, "
          f"max {max(times):.2f}, {len(times)} runs)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    world = MPI.COMM_WORLD
    rank = world.Get_rank()
    assert world.Get_size() == 3, "run with -n 3: rank 0 decides, rank 1 dies, rank 2 spares"
    world.Barrier()
    if rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    if rank == 2:
        for k in range(args.repeats):
            world.recv(source=0, tag=ASSIGN)
            become_collector(world, incarnation=k + 1)
        return
    from machine import machine_line

    print(machine_line(), flush=True)
    while not world.Get_failed().Get_size():  # the job carries a failure from here on
        world.Iprobe(MPI.ANY_SOURCE, 0)
        time.sleep(0.05)
    cfg = from_dict({}, SETS)
    actor = make_actor(cfg, env_spaces(cfg))
    weights = Weights.empty_like(actor)
    weights.capture(actor, 1, 0)
    header = rollout_layout(cfg, env_spaces(cfg), cfg.env.num_envs).new().header
    spare, spawn = [], []
    for _ in range(args.repeats):
        started = time.perf_counter()
        world.send(2, dest=2, tag=ASSIGN)
        send_weights_and_wait(world, 2, weights, header)
        spare.append(time.perf_counter() - started)
    report("spare rank", spare)
    for _ in range(args.repeats):
        started = time.perf_counter()
        inter = MPI.COMM_SELF.Spawn(sys.executable, [os.path.abspath(__file__), "--child"],
                                    maxprocs=1)
        merged = inter.Merge(high=False)
        send_weights_and_wait(merged, 1, weights, header)
        spawn.append(time.perf_counter() - started)
        merged.Free()
        inter.Disconnect()
    report("MPI_Comm_spawn + merge", spawn)
    os._exit(0)  # the job lost rank 1: leave without MPI_Finalize (see hpcrl.comm.faults)


if __name__ == "__main__":
    if "--child" in sys.argv:
        child()  # (its own job has lost nothing: it finalises as usual)
        sys.exit(0)
    main()
    os._exit(0)
