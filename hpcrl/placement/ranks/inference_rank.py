"""The loop of an inference rank: one batched forward for the requests of many collectors.

An inference rank holds the policy of its gradient worker (on ``scheme.inference_device``)
and serves a fixed set of that worker's collectors (the rank table's ``feeds``), each
through one slot per group of its envs (:mod:`hpcrl.exchange.acting_slots`: the node's shared
window, or messages from another node). Each turn it takes every request that has arrived,
runs the step requests of all of them as one forward over the concatenated envs, and writes
each slot its rows; a value request (a truncated episode's final observation, a rollout's
bootstrap) is answered alone. Sample Factory's policy workers batch alike. Which requests
are ready depends on timing, so in a deterministic job (``train.deterministic``) a forward
must not depend on them: the numpy engine computes each row on its own, and any other
engine runs one request at a time where the job asks for bits (``true``).

Weights reach it from the worker the way they reach collectors (the same messages, commands
included), and it serves a request only once it holds the weights version the collector
was told to collect with: in a synchronous job every step is taken with exactly the
weights the collector would have used, in an asynchronous one never with older ones. The
STOP message carries the newest weights, which answer whatever the collectors still ask. It
holds no state a checkpoint needs (see :mod:`~hpcrl.exchange.remote_acting`), and
leaves once the worker said STOP and every collector said it has left.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from hpcrl.comm.faults import DEAD, LOST, is_peer_failure
from hpcrl.exchange.acting_slots import BYE, VALUE, ServerEnd, reply_of, serve_until
from hpcrl.exchange.latest_weights import ParamsReceiver
from hpcrl.exchange.messages import ENV_FAILED, PREEMPTED, STOP, Weights
from hpcrl.exchange.node_transport import ACTING, ExchangeJob
from hpcrl.exchange.protocol import TAG_WEIGHTS
from hpcrl.exchange.remote_acting import acting_spec, server_ends
from hpcrl.models.acting import computes_rows_alone, make_engine

if TYPE_CHECKING:  # annotations only
    import torch
    from torch import nn

    from hpcrl.algorithms.algorithm import Algorithm
    from hpcrl.sections.schema import TrainConfig


class InferenceJob(ExchangeJob, Protocol):
    """What an inference rank reads of its job: what its acting slots read
    (:class:`~hpcrl.exchange.node_transport.ExchangeJob`: its role and the collectors it
    feeds, the channel, codec and shared window, the envs in groups), with its device, the
    ``train`` section (compiling, determinism), the algorithm's class (where it acts) and a
    fresh acting policy on that device."""

    device: torch.device

    @property
    def train(self) -> TrainConfig:
        """The ``train`` section (``compile``, ``deterministic``)."""

    @property
    def deterministic(self) -> bool:
        """Whether the job takes the deterministic paths."""

    @property
    def algorithm_type(self) -> type[Algorithm]:
        """The class of the algorithm of this rank's policy."""

    def new_policy(self, device: torch.device | None = None) -> nn.Module:
        """A fresh acting policy of the job's algorithm on ``device``."""


def serving_engine(job: InferenceJob) -> tuple[Any, Any]:
    """The module an inference rank holds and the engine that evaluates it: the job's acting
    policy, on the rank's device and compiled under ``train.compile`` where the algorithm
    declares it acts there (the actor-critic), else in numpy on the CPU (an off-policy
    agent's policy: :attr:`~hpcrl.algorithms.algorithm.Algorithm.acts_on_device`); each
    row computed alone where the job is deterministic and the engine can."""
    on_device = job.algorithm_type.acts_on_device
    policy = job.new_policy(job.device if on_device else None)
    return policy, make_engine(policy, compile=on_device and job.train.compile,
                               rows_alone=job.deterministic)


class InferenceRank:
    """Serves its collectors' requests with the newest weights of its gradient worker."""

    def __init__(self, job: InferenceJob) -> None:
        self.job, self.channel = job, job.channel
        self.worker = job.workers[job.role.group]
        self.collectors = list(job.role.feeds)
        self.actor, self.engine = serving_engine(job)
        # a deterministic job's forwards must not depend on which requests were ready: an
        # engine whose rows are computed alone batches them all the same; another runs one
        # request (one group of one collector's envs) at a time where the job asks for bits
        # (train.deterministic=true): unbatched forwards cost a network of torch kernels
        # (a Nature CNN's 16 rows take 1.5x the time in 4 forwards), which auto does not pay
        self.one_by_one = (job.train.deterministic is True
                           and not computes_rows_alone(self.engine))
        spec = self.spec = acting_spec(job, self.actor)  # what the replies hold
        self.noisy = spec.noise_shape is not None  # requests carry noise / recurrent state
        self.stateful = spec.state_size > 0
        groups = job.env_groups
        self.envs = job.num_envs // groups  # the rows of one slot
        memory = job.memory
        # each collector's slots, one per group: in shared memory when it shares this node
        self.ends: list[ServerEnd] = []
        self.owner: list[int] = []  # the collector of each slot
        for c in self.collectors:
            region = None if memory is None else memory.region(c, ACTING)
            self.ends += server_ends(self.channel, c, spec, self.envs, groups, memory, region)
            self.owner += [c] * groups
        self.left: set[int] = set()  # slots whose collector said goodbye (or was lost)
        self.weights = Weights.empty_like(self.actor)
        self.params = ParamsReceiver(self.channel, self.weights, self.worker, job.codec)
        self.weight_receives: list[Any] = [
            self.channel.irecv(self.weights.header.data, self.worker, TAG_WEIGHTS), None]
        self.version = -1  # no weights yet: nothing is served before the first ones
        self.stopped = False
        self.preempted = False
        self.env_failed = False
        self.batches = 0  # step forwards run, and the env rows they held (batching tested)
        self.rows = 0

    def run(self) -> None:
        """Serve the collectors' requests, taking new weights between them, until STOP came and
        every collector said goodbye (spinning a moment after each, then backing off while
        idle), then close the slots."""
        serve_until(lambda: self._take_weights() | self._serve(),
                    lambda: self.stopped and len(self.left) == len(self.ends))
        for i, end in enumerate(self.ends):
            if self.owner[i] not in LOST:
                end.close()

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
                self.env_failed = bool(w.command & ENV_FAILED)
                break
            self.weight_receives = [self.channel.irecv(w.header.data, self.worker, TAG_WEIGHTS),
                                    None]
        return took

    # -- requests ----------------------------------------------------------------------------
    def _serve(self) -> bool:
        """Answer every request that arrived and can be served now; True when any was."""
        steps: list[int] = []
        values: list[int] = []
        for i, end in enumerate(self.ends):
            if i in self.left or not self._ready(i, end):
                continue
            request = end.request
            method = int(request.method)
            if method == BYE:
                end.consume()
                self.left.add(i)
            elif int(request.version) <= self.version:
                (values if method == VALUE else steps).append(i)
        if steps and self.one_by_one:
            for i in steps:
                self._step([i])
        elif steps:
            self._step(steps)
        for i in values:
            self._value(i)
        return bool(steps or values)

    def _ready(self, i: int, end: ServerEnd) -> bool:
        """Whether slot ``i`` holds a request; a slot whose collector is lost (a job that
        survives it) has left for good, and what it had asked for is dropped."""
        if self.owner[i] in LOST:
            self.left.add(i)
            return False
        try:
            return end.ready()
        except Exception as exc:
            if not is_peer_failure(exc):
                raise
            LOST.mark(self.owner[i], DEAD)
            self.left.add(i)
            return False

    def _step(self, ids: list[int]) -> None:
        """One forward over the envs of every slot in ``ids``."""
        requests = [self.ends[i].request for i in ids]
        obs = np.concatenate([r.obs for r in requests])
        noise = np.concatenate([r.noise for r in requests]) if self.noisy else None
        state = np.concatenate([r.state for r in requests]) if self.stateful else None
        out = reply_of(self.engine.step(obs, noise, state), self.spec)
        n = self.envs
        for k, i in enumerate(ids):
            self._reply(i, **{name: value[k * n:(k + 1) * n] for name, value in out.items()})
        self.batches += 1
        self.rows += len(obs)

    def _value(self, i: int) -> None:
        request, reply = self.ends[i].request, self.ends[i].reply
        count = int(request.count)
        state = request.state[:count] if self.stateful else None
        reply.values[:count] = self.engine.value(request.obs[:count], state)
        self._reply(i)

    def _reply(self, i: int, **fields: np.ndarray) -> None:
        """Write slot ``i`` its reply (``fields`` first) and hand it back."""
        end = self.ends[i]
        end.reply.set(version=self.version, **fields)
        end.answer()
