"""What a collector's rollout stream costs between two ranks of one node, through hpcrl's own
transport: MPI messages (``scheme.transport=messages``), lz4-compressed messages
(``scheme.compress=lz4``) and the node's shared window (``scheme.transport=auto``, the
default within a node). (An env step's acting round trip is measured by
``benchmarks/node_speed_micro.py``.)

With the objects a job uses:

* **an Atari rollout** (``examples/atari-ppo.yaml``: 8 envs x 128 steps of uint8 ``[4, 84,
  84]`` frames plus the float fields): rank 1 sends it with a
  :class:`~hpcrl.exchange.streams.StreamOut`, rank 0 takes it with a ``StreamIn``. As
  messages, header and data cross (MPICH copies the data through its shared-memory channel,
  twice); through the window, rank 1 collected into its slot and only the header crosses,
  rank 0 reading the data in place; compressed, rank 1 packs the data with lz4 and rank 0
  unpacks it. The rollout holds real Pong frames (random actions), what lz4 meets. Timed on
  rank 0, from both ranks ready to the rollout taken (the collector's fill of the buffer is
  not counted, its compression is);
Per exchange it prints the bytes, the median time both ways and their ratio.

    mpiexec -n 2 python benchmarks/rollout_transfer.py [--repeats 30]
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from machine import machine_line
from mpi4py import MPI

from hpcrl.buffers.rollout import RolloutLayout
from hpcrl.comm import wait
from hpcrl.comm.channel import MpiChannel
from hpcrl.comm.compression import Lz4Codec, PlainCodec
from hpcrl.comm.node_memory import NodeMemory, node_peers
from hpcrl.exchange.node_transport import STREAM, STREAM_SLOTS
from hpcrl.exchange.streams import StreamIn, StreamOut

ENVS, STEPS, FRAMES = 8, 128, (4, 84, 84)


def rollout_layout() -> RolloutLayout:
    return RolloutLayout(STEPS, ENVS, FRAMES, (), "uint8")


def open_memory(comm: MPI.Comm, shared: bool) -> NodeMemory | None:
    """The node window with rank 1's regions (as a collector of rank 0 owns them), or None
    for messages."""
    if not shared:
        return None
    regions = {STREAM: STREAM_SLOTS * rollout_layout().data_size * 4}
    return NodeMemory(node_peers(comm), comm.rank, regions if comm.rank == 1 else {})


def pong_rollout() -> np.ndarray:
    """The step fields of a rollout of real Pong frames (random actions, the Atari preset):
    what compression meets."""
    from hpcrl.config import load_config
    from hpcrl.envs.vector import make_vector_env

    cfg = load_config(None, ["env.id=PongNoFrameskip-v4", "env.preset=atari",
                             f"env.num_envs={ENVS}"])
    envs = make_vector_env(cfg.env, ENVS)
    rollout = rollout_layout().new()
    obs, _ = envs.reset(seed=0)
    for t in range(STEPS):
        rollout.obs[t] = obs
        rollout.actions[t] = envs.action_space.sample()
        obs, rewards, *_ = envs.step(rollout.actions[t].astype(np.int64))
        rollout.rewards[t] = rewards
    envs.close()
    return rollout.data


def nature_cnn_params() -> np.ndarray:
    """The flat parameters of the Atari recipe's actor (freshly initialised)."""
    from hpcrl.build import env_spaces, make_actor
    from hpcrl.config import load_config
    from hpcrl.numerics.flat import params_to_flat

    cfg = load_config(None, ["env.id=PongNoFrameskip-v4", "env.preset=atari",
                             "actor.encoder=nature_cnn"])
    return params_to_flat(make_actor(cfg, env_spaces(cfg))).numpy()


def stream_rollouts(comm: MPI.Comm, memory: NodeMemory | None, codec: PlainCodec,
                    data: np.ndarray | None, repeats: int) -> list[float]:
    """Seconds rank 0 took to receive each rollout (``data``, rank 1's) of rank 1's stream."""
    channel = MpiChannel(comm)
    layout = rollout_layout()
    times = []
    if comm.rank == 1:
        region = None if memory is None else memory.region(1, STREAM)
        out = StreamOut(channel, 0, layout, codec, region, memory, owner=1)
        for _ in range(repeats):
            buffer = out.next_buffer()
            buffer.data[:] = data  # collected into the buffer: not timed
            comm.Barrier()
            for request in out.send(buffer):
                wait(request)
    else:
        region = None if memory is None else memory.region(1, STREAM)
        stream = StreamIn(channel, 1, layout, codec, region, memory)
        for _ in range(repeats):
            head = stream.post()
            comm.Barrier()
            start = time.perf_counter()
            wait(head)
            rollout = stream.take()
            times.append(time.perf_counter() - start)
            float(rollout.data[::4096].sum())  # the learner reads it (not timed)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    if comm.size != 2:
        raise SystemExit("run it on 2 ranks of one node: mpiexec -n 2 python "
                         "benchmarks/rollout_transfer.py")
    data = pong_rollout() if comm.rank == 1 else None
    results = {}
    for name, shared, codec in (("messages", False, PlainCodec()),
                                ("lz4 messages", False, Lz4Codec()),
                                ("shared window", True, PlainCodec())):
        memory = open_memory(comm, shared)
        results[name] = stream_rollouts(comm, memory, codec, data, args.repeats)
        if memory is not None:
            memory.close()
    # rank 0 timed the rollouts, rank 1 knows the bytes
    packed = comm.bcast(Lz4Codec().pack(data).nbytes if comm.rank == 1 else None, root=1)
    if comm.rank != 0:
        return
    print(machine_line())
    layout = rollout_layout()
    mb = layout.data_size * 4 / 1e6
    print(f"2 ranks of one node, hpcrl's StreamOut/StreamIn, median of {args.repeats} "
          f"rollouts")
    print(f"an Atari rollout of Pong frames ({ENVS} envs x {STEPS} steps of uint8 "
          f"{list(FRAMES)}): {mb:.2f} MB of step fields, {packed / 1e6:.2f} MB lz4-compressed "
          f"({mb * 1e6 / packed:.1f}x)")
    base = statistics.median(results["messages"])
    for name, times in results.items():
        t = statistics.median(times)
        print(f"{name:>14}: {t * 1e3:7.3f} ms per rollout ({base / t:5.2f}x messages), "
              f"{t / (ENVS * STEPS) * 1e6:.3f} us per env step")
    gbit = packed * 8 / 1e9
    print(f"over a network of B Gbit/s the rollout takes {mb * 8 / 1e3:.3f} / B s plain and "
          f"{gbit:.3f} / B s + the lz4 time above compressed")
    params = nature_cnn_params()
    codec = Lz4Codec()
    start = time.perf_counter()
    payload = codec.pack(params)
    seconds = time.perf_counter() - start
    print(f"the Nature CNN's weights ({params.size:,} float32, {params.nbytes / 1e6:.2f} MB): "
          f"{payload.nbytes / 1e6:.2f} MB lz4-compressed ({params.nbytes / payload.nbytes:.2f}x) "
          f"in {seconds * 1e3:.1f} ms: float weights hardly compress")


if __name__ == "__main__":
    main()
