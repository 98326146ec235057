"""The loop of an inference rank: one batched forward for the requests of many collectors.

An inference rank holds the policy of its gradient worker (on ``scheme.inference_device``)
and serves a fixed group of that worker's collectors (the rank table's ``feeds``). Each
turn it takes every request that has arrived, runs the step requests of all of them as one
forward over the concatenated envs, and answers each collector with its rows; a value
request (a truncated episode's final observation, a rollout's bootstrap) is answered alone.

Weights reach it from the worker the way they reach collectors (the same messages, commands
included), and it serves a request only once it holds the weights version the collector
was told to collect with: in a synchronous job every step is taken with exactly the
weights the collector would have used, in an asynchronous one never with older ones. The
STOP message carries the newest weights, which answer whatever the collectors still ask. It
holds no state a checkpoint needs (see :mod:`~hpcrl.placement.mpi.remote_acting`), and
leaves once the worker said STOP and every collector said it has left.
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np

from hpcrl.comm import Poll
from hpcrl.comm.faults import DEAD, LOST, request_failed
from hpcrl.core.acting import make_engine
from hpcrl.placement.mpi.job import MpiJob
from hpcrl.placement.mpi.latest_weights import ParamsReceiver
from hpcrl.placement.mpi.node_transport import ACTING
from hpcrl.placement.mpi.remote_acting import BYE, VALUE, Carrier, acting_records, acting_spec
from hpcrl.roles.messages import PREEMPTED, STOP, Weights
from hpcrl.roles.protocol import TAG_ACT, TAG_ACTED, TAG_WEIGHTS

IDLE_POLL = Poll(initial_s=5e-6, max_s=2e-4, growth=1.5)  # a request waits at most ~0.2 ms


def serving_engine(job: MpiJob) -> tuple[Any, Any]:
    """The module an inference rank holds and the engine that evaluates it: the actor-critic
    on the rank's device, or an off-policy agent's acting policy (numpy, on the CPU)."""
    if job.off_policy:
        from hpcrl.core.algorithms.offpolicy import make_policy

        policy = make_policy(job.config, job.spaces)
        return policy, make_engine(policy)
    actor = job.new_actor(job.device)
    return actor, make_engine(actor)


class InferenceRank:
    """Serves its collectors' requests with the newest weights of its gradient worker."""

    def __init__(self, job: MpiJob) -> None:
        self.job, self.channel = job, job.channel
        self.worker = job.workers[job.role.group]
        self.collectors = list(job.role.feeds)
        self.actor, self.engine = serving_engine(job)
        spec = acting_spec(job, self.actor)
        self.on_policy = spec.on_policy
        self.noisy = spec.noise_shape is not None  # requests carry noise / recurrent state
        self.stateful = spec.state_size > 0
        envs = job.config.env.num_envs
        self.envs = envs
        memory = job.memory
        regions = [None if memory is None else memory.region(c, ACTING) for c in self.collectors]
        records = [acting_records(spec, envs, region) for region in regions]
        self.requests = [request for request, _ in records]
        self.replies = [reply for _, reply in records]
        # each collector's records: in shared memory when it shares this node
        self.carriers = [Carrier(self.channel, c, memory if region is not None else None)
                         for c, region in zip(self.collectors, regions, strict=True)]
        self.receives = [carrier.receive(r, TAG_ACT)
                         for carrier, r in zip(self.carriers, self.requests, strict=True)]
        self.arrived = [False] * len(self.collectors)
        self.sends: list[Any] = [None] * len(self.collectors)
        self.left: set[int] = set()
        self.weights = Weights.empty_like(self.actor)
        self.params = ParamsReceiver(self.channel, self.weights, self.worker, job.codec)
        self.weight_receives: list[Any] = [
            self.channel.irecv(self.weights.header.data, self.worker, TAG_WEIGHTS), None]
        self.version = -1  # no weights yet: nothing is served before the first ones
        self.stopped = False
        self.preempted = False
        self.batches = 0  # step forwards run, and the env rows they held (batching tested)
        self.rows = 0

    def run(self) -> None:
        """Serve the collectors' requests, taking new weights between them, until STOP came and
        every collector said goodbye; backs off while idle, then waits for the last replies."""
        delay = IDLE_POLL.initial_s
        while not (self.stopped and len(self.left) == len(self.collectors)):
            if self._take_weights() | self._serve():
                delay = IDLE_POLL.initial_s
                continue
            time.sleep(delay)
            delay = min(delay * IDLE_POLL.growth, IDLE_POLL.max_s)
        for i, request in enumerate(self.sends):
            if request is not None and self.collectors[i] not in LOST:
                self.channel.wait(request)

    # -- weights -----------------------------------------------------------------------------
    def _take_weights(self) -> bool:
        """Load every weights message that arrived; True when one did."""
        took = False
        w = self.weights
        while not self.stopped:
            if self.weight_receives[1] is None:
                if not self.channel.test(self.weight_receives[0]):
                    break
                self.weight_receives[1] = self.params.post()
            self.channel.wait(self.weight_receives[1])
            self.params.unpack()
            took = True
            # STOP carries the newest weights too: load them, since a collector may already
            # ask with a version this rank skipped (newest-weights delivery passes over a
            # busy subscriber), and only these weights can answer it
            w.load_into(self.actor)
            self.engine.sync()
            self.version = w.version
            if w.command & STOP:
                self.stopped, self.preempted = True, bool(w.command & PREEMPTED)
                break
            self.weight_receives = [self.channel.irecv(w.header.data, self.worker, TAG_WEIGHTS),
                                    None]
        return took

    # -- requests ----------------------------------------------------------------------------
    def _serve(self) -> bool:
        """Answer every request that arrived and can be served now; True when any was."""
        for i, receive in enumerate(self.receives):
            if i not in self.left and self._lost(i):
                continue
            if not self.arrived[i] and i not in self.left and self._done(i, receive):
                self.carriers[i].arrived()
                self.arrived[i] = True
                if self.sends[i] is not None:  # the collector took the last reply
                    if not self._done(i, self.sends[i]):
                        self.channel.wait(self.sends[i])
                    self.sends[i] = None
        steps: list[int] = []
        values: list[int] = []
        for i, here in enumerate(self.arrived):
            if not here:
                continue
            request = self.requests[i]
            method = int(request.method)
            if method == BYE:
                self.left.add(i)
                self.arrived[i] = False
            elif int(request.version) <= self.version:
                (values if method == VALUE else steps).append(i)
        if steps:
            self._step(steps)
        for i in values:
            self._value(i)
        return bool(steps or values)

    def _lost(self, i: int) -> bool:
        """Whether collector ``i`` is lost (a job that survives it): it has left for good,
        and what it had asked for is dropped."""
        if self.collectors[i] not in LOST:
            return False
        self.left.add(i)
        self.arrived[i] = False
        return True

    def _done(self, i: int, request: Any) -> bool:
        """One ``Test`` of a request with collector ``i``; a dead collector is lost."""
        done, dead = request_failed(self.channel, request)
        if dead:
            LOST.mark(self.collectors[i], DEAD)
            self._lost(i)
        return done

    def _step(self, ids: list[int]) -> None:
        """One forward over the envs of every collector in ``ids``."""
        requests = [self.requests[i] for i in ids]
        obs = np.concatenate([r.obs for r in requests])
        noise = np.concatenate([r.noise for r in requests]) if self.noisy else None
        if self.on_policy:
            state = np.concatenate([r.state for r in requests]) if self.stateful else None
            actions, log_probs, values, new_state = self.engine.step(obs, noise, state)
            out = {"actions": actions, "log_probs": log_probs, "values": values}
            if new_state is not None:
                out["state"] = new_state
        else:
            out = {"actions": self.engine.act(obs, noise)}
        n = self.envs
        for k, i in enumerate(ids):
            self._reply(i, **{name: value[k * n:(k + 1) * n] for name, value in out.items()})
        self.batches += 1
        self.rows += len(obs)

    def _value(self, i: int) -> None:
        request, reply = self.requests[i], self.replies[i]
        count = int(request.count)
        state = request.state[:count] if self.stateful else None
        reply.values[:count] = self.engine.value(request.obs[:count], state)
        self._reply(i)

    def _reply(self, i: int, **fields: np.ndarray) -> None:
        """Send collector ``i`` its reply (``fields`` written into it first) and wait for
        its next request."""
        reply = self.replies[i]
        reply.set(version=self.version, **fields)
        self.sends[i] = self.carriers[i].send(reply, TAG_ACTED)
        self.arrived[i] = False
        self.receives[i] = self.carriers[i].receive(self.requests[i], TAG_ACT)
