"""The micro-figures of ``benchmarks/node_speed.py``, on 2 ranks of one node, with hpcrl's own
classes:

* **acting round trip**: a collector's request and its reply through one slot
  (:mod:`hpcrl.exchange.acting_slots`) as MPI messages and in the node's shared window, the
  server waiting for requests as an inference rank does
  (:func:`~hpcrl.exchange.acting_slots.serve_until`): median microseconds per round trip, and
  their ratio;
* **env groups**: a collector (rank 1, hpcrl's :class:`~hpcrl.collection.collector.Collector`
  and rollout filler) acting through rank 0, whose every forward costs about as long as
  one step of the collector's envs (both busy-wait ``--cost-us``): env steps per second
  with ``scheme.env_groups`` 1 and 2, and their ratio;
* **copies per rollout**: bytes the learner's storages copy of side-by-side rollouts
  before the first minibatch (:attr:`hpcrl.buffers.rollout_storage.RolloutStorage.copied_bytes`),
  in rollouts.

It prints one JSON line on rank 0 (``node_speed.py`` reads it).

    mpiexec -n 2 python benchmarks/node_speed_micro.py [--cost-us 400] [--seconds 6]
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import gymnasium as gym
from mpi4py import MPI

from hpcrl.buffers.rollout_storage import RolloutStorage
from hpcrl.buffers.vtrace_storage import VTraceStorage
from hpcrl.build import env_spaces, make_actor, rollout_layout
from hpcrl.collection.collector import rollout_collector
from hpcrl.comm.channel import MpiChannel
from hpcrl.comm.node_memory import NodeMemory, node_peers
from hpcrl.config import from_dict
from hpcrl.envs.groups import EnvGroups
from hpcrl.exchange.acting_slots import BYE, STEP, actor_critic_spec, serve_until
from hpcrl.exchange.remote_acting import RemoteEngine, RemoteLinks, client_ends, server_ends
from hpcrl.models.acting import make_engine

ENVS, FRAMES = 8, (4, 84, 84)  # an Atari collector's request
COLLECT_ENVS, COLLECT_STEPS = 8, 32


def busy(seconds: float) -> None:
    """Spend ``seconds`` of this core (a simulator's step, a network's forward)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


class CostlyCartPole(gym.Wrapper):
    """CartPole whose every step costs its vector env's share of ``cost`` seconds."""

    cost = 0.0

    def step(self, action: Any) -> Any:
        """Busy-wait, then step."""
        busy(self.cost)
        return self.env.step(action)


def frames_spec() -> Any:
    """The acting spec of an Atari actor-critic: frame stacks in, one categorical action."""
    class Actor:
        recurrent, state_size, integer_actions = False, 0, True

        class distribution:  # noqa: N801
            @staticmethod
            def noise_shape() -> tuple[int, ...]:
                return ()
    return actor_critic_spec(Actor(), FRAMES, "uint8", ())


def open_memory(comm: Any, words: int) -> NodeMemory:
    """The node's window with rank 1's acting region (as a collector owns it)."""
    return NodeMemory(node_peers(comm), comm.rank, {"acting": words * 4} if comm.rank else {})


def round_trips(comm: Any, shared: bool, repeats: int) -> list[float]:
    """Seconds per round trip on rank 1 (the collector), through one slot."""
    spec = frames_spec()
    memory = open_memory(comm, spec.slot_words(ENVS)) if shared else None
    region = memory.region(1, "acting") if memory is not None else None
    channel = MpiChannel(comm)
    times: list[float] = []
    comm.Barrier()
    if comm.rank == 1:
        (end,) = client_ends(channel, 0, spec, ENVS, 1, memory, region)
        end.request.obs[:] = 1
        for _ in range(repeats):
            start = time.perf_counter()
            end.request.set(method=STEP)
            end.post()
            end.wait()
            times.append(time.perf_counter() - start)
        end.leave()
    else:
        (server,) = server_ends(channel, 1, spec, ENVS, 1, memory, region)
        left = []

        def answer() -> bool:
            if not server.ready():
                return False
            if int(server.request.method) == BYE:
                server.consume()
                left.append(1)
            else:
                server.reply.actions[:] = server.request.obs[:, 0, 0, 0]
                server.answer()
            return True

        serve_until(answer, lambda: bool(left))  # as an inference rank waits for requests
        server.close()
    comm.Barrier()
    if memory is not None:
        memory.close()
    return times


def collection_rate(comm: Any, groups: int, cost: float, seconds: float) -> float:
    """Env steps per second of rank 1's collector acting through rank 0 with ``groups``
    groups, env steps and forwards each costing ``cost`` seconds per vector step."""
    cfg = from_dict({}, [f"env.num_envs={COLLECT_ENVS}", f"algo.num_steps={COLLECT_STEPS}",
                         f"algo.ppo.minibatch_size={COLLECT_ENVS * COLLECT_STEPS}"])
    spaces = env_spaces(cfg)
    actor = make_actor(cfg, spaces)
    layout = rollout_layout(cfg, spaces, COLLECT_ENVS)
    spec = actor_critic_spec(actor, layout.obs_shape, layout.obs_dtype, layout.action_shape)
    per = COLLECT_ENVS // groups
    memory = open_memory(comm, groups * spec.slot_words(per))
    region = memory.region(1, "acting")
    channel = MpiChannel(comm)
    rate = 0.0
    comm.Barrier()
    if comm.rank == 1:
        CostlyCartPole.cost = cost / COLLECT_ENVS  # a vector step of every env: ``cost``

        def make(first: int, count: int) -> gym.vector.VectorEnv:
            return gym.vector.SyncVectorEnv(
                [lambda: CostlyCartPole(gym.make("CartPole-v1")) for _ in range(count)],
                autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)

        links = RemoteLinks(client_ends(channel, 0, spec, per, groups, memory, region),
                            lambda: 0)
        collector = rollout_collector(EnvGroups.of(make, COLLECT_ENVS, groups), actor,
                                      cfg.env, cfg.algo.gamma, cfg.seed,
                                      engine=RemoteEngine(links))
        rollout = layout.new()
        collector.collect(rollout)  # warm-up
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            collector.collect(rollout)
            steps += COLLECT_STEPS * COLLECT_ENVS
        rate = steps / (time.perf_counter() - start)
        links.close()
    else:
        engine = make_engine(actor)
        ends = server_ends(channel, 1, spec, per, groups, memory, region)
        gone: set[int] = set()

        def serve() -> bool:
            served = False
            for g, end in enumerate(ends):
                if g in gone or not end.ready():
                    continue
                served = True
                request = end.request
                if int(request.method) == BYE:
                    end.consume()
                    gone.add(g)
                    continue
                busy(cost * per / COLLECT_ENVS)  # a forward of this many envs
                count = int(request.count)
                if int(request.method) == STEP:
                    actions, log_probs, values, _ = engine.step(request.obs, request.noise)
                    end.reply.set(actions=actions, log_probs=log_probs, values=values)
                else:
                    end.reply.values[:count] = engine.value(request.obs[:count])
                end.answer()
            return served

        serve_until(serve, lambda: len(gone) == groups)
    comm.Barrier()
    memory.close()
    return rate


def copies_per_rollout() -> dict[str, float]:
    """Rollouts' worth of bytes each storage copies before the first minibatch of two
    side-by-side rollouts, on this CPU."""
    cfg = from_dict({}, ["env.num_envs=4", "algo.num_steps=16", "algo.ppo.minibatch_size=32"])
    spaces = env_spaces(cfg)
    layout = rollout_layout(cfg, spaces, 4)
    rollouts = [layout.new(), layout.new()]
    for k, r in enumerate(rollouts):
        r.set_facts(16, 0, 4 * k, k)
    gae = RolloutStorage(cfg.algo.gamma, cfg.algo.gae_lambda)
    gae.load(rollouts)
    vtrace = VTraceStorage(cfg.algo.gamma)
    vtrace.load(rollouts)
    size = sum(r.data.nbytes for r in rollouts)
    return {"gae": gae.copied_bytes / size, "vtrace": vtrace.copied_bytes / size}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2000)
    parser.add_argument("--cost-us", type=float, default=400.0)
    parser.add_argument("--seconds", type=float, default=6.0)
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    if comm.size != 2:
        raise SystemExit("run it on 2 ranks of one node: mpiexec -n 2 python "
                         "benchmarks/node_speed_micro.py")
    messages = round_trips(comm, False, args.repeats)
    shared = round_trips(comm, True, args.repeats)
    rates = {g: collection_rate(comm, g, args.cost_us * 1e-6, args.seconds) for g in (1, 2)}
    if comm.rank == 1:
        comm.send({"messages_us": statistics.median(messages) * 1e6,
                   "shared_us": statistics.median(shared) * 1e6,
                   "groups_1": rates[1], "groups_2": rates[2]}, dest=0)
    else:
        figures = comm.recv(source=1)
        figures["copies"] = copies_per_rollout()
        figures["cost_us"] = args.cost_us
        print(json.dumps(figures), flush=True)


if __name__ == "__main__":
    main()
