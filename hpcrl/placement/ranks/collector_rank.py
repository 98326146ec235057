"""The loop of a dedicated collector rank, synchronous or asynchronous.

Synchronous: wait for a weights message (which carries the leader's command), collect one
rollout (stopping early when its gradient worker says the stragglers may stop), send it.
Asynchronous: never wait; take the newest weights that arrived between rollouts, keep one
rollout in flight while the next is collected, and stop when a STOP command arrives.

What it collects and streams is its algorithm family's unit, built by the family's wiring
(the job's ``wiring``): rollouts, or the transition chunks of
``algo.num_steps`` steps an off-policy learner adds to its replay; the loops are the same.
"""
from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from hpcrl.collection.collector import Collector
from hpcrl.comm.channel import Channel
from hpcrl.envs.restarts import EnvFailure
from hpcrl.exchange.latest_weights import ParamsReceiver
from hpcrl.exchange.messages import CHECKPOINT, ENV_FAILED, PREEMPTED, STOP, Weights
from hpcrl.exchange.node_transport import ACTING, ExchangeJob, stream_out
from hpcrl.exchange.protocol import TAG_FINAL, TAG_PREEMPT, TAG_STATE, TAG_WEIGHTS
from hpcrl.exchange.remote_acting import (
    RemoteLinks,
    acting_spec,
    client_ends,
)
from hpcrl.placement.env_failures import FailingRank, failed_state, mark_failed, tell_leader

if TYPE_CHECKING:  # annotations only
    from hpcrl.algorithms.algorithm import Algorithm


class CollectorJob(ExchangeJob, FailingRank, Protocol):
    """What a collector rank reads of its job: what its exchanges read (its stream out, its
    inference rank's slots: :class:`~hpcrl.exchange.node_transport.ExchangeJob`) and what
    it tells rank 0 of a failed env (:class:`~hpcrl.placement.env_failures.FailingRank`),
    with its envs, the algorithm's class (whether its learner rate-limits it), the steps of
    one collection (preemption's minimum share) and who takes weights headers alone."""

    @property
    def algorithm_type(self) -> type[Algorithm]:
        """The class of the algorithm of this rank's policy."""

    @property
    def steps_per_collection(self) -> int:
        """Steps of each env in one collection (``algo.num_steps``)."""

    @property
    def header_only(self) -> frozenset[int]:
        """The subscribers whose weights messages are headers alone."""

    def collector_envs(self) -> Any:
        """This rank's envs, made by the env layer."""


class PreemptListener:
    """A collector's side of preemption: a standing receive for 'stragglers may stop'."""

    def __init__(self, channel: Channel, worker: int, min_steps: int) -> None:
        self.channel, self.worker, self.min_steps = channel, worker, min_steps
        self.buf = np.zeros(1, np.int64)
        self.request = channel.irecv(self.buf, worker, TAG_PREEMPT)
        self.update = -1
        self.preempted = False

    def begin(self, update: int) -> None:
        """Start listening for update ``update``'s notice (an older update's notice is ignored)."""
        self.update, self.preempted = update, False

    def _poll(self) -> None:
        while self.channel.test(self.request):
            if int(self.buf[0]) == self.update:
                self.preempted = True
            self.request = self.channel.irecv(self.buf, self.worker, TAG_PREEMPT)

    def should_stop(self, steps_done: int) -> bool:
        """Whether this update's notice arrived and ``steps_done`` reaches the minimum share of
        the rollout (``scheme.preemption.fraction_samples``)."""
        self._poll()
        return self.preempted and steps_done >= self.min_steps

    def close(self) -> None:
        """Take any notice still arriving, then cancel the standing receive."""
        self._poll()
        self.channel.cancel(self.request)


class CollectorRank:
    """Holds this rank's envs and a policy copy; talks only to its gradient worker."""

    def __init__(self, job: CollectorJob, resume_state: dict[str, Any] | None,
                 incarnation: int = 0) -> None:
        self.job, self.channel = job, job.channel
        # > 0: a spare that took a lost collector's place (its envs from fresh seeds)
        self.incarnation = incarnation
        self.worker = job.workers[job.role.group]
        self.envs = job.collector_envs()
        self.link: RemoteLinks | None = None  # to the inference rank that acts for it
        # what it collects is its family's unit (a rollout, a chunk, a plug-in family's
        # own), acting with the family's policy or through its inference rank
        link = self._link if job.role.inference >= 0 else None
        self.collector: Collector[Any]
        self.collector, self.module = job.wiring.collector(job, self.envs, link, incarnation)
        self.weights = Weights.empty_like(self.module)
        self.params = ParamsReceiver(self.channel, self.weights, self.worker, job.codec)
        # a learner that rate-limits its collectors holds this rank back: sends are synchronous
        self.stream = stream_out(job, job.stream_layout(),
                                 synchronous=job.algorithm_type.rate_limits_collectors)
        if resume_state is not None:
            self.collector.load_state_dict(resume_state)
        p = job.scheme.preemption
        self.preempt = (PreemptListener(self.channel, self.worker,
                                        math.ceil(p.fraction_samples * job.steps_per_collection))
                        if p.fraction_workers < 1.0 or p.fraction_samples < 1.0 else None)
        self.sent = 0
        self.unsent = False  # a collected rollout is waiting to be sent
        # an inference rank acts for it: its weights messages are headers alone
        self.header_only = job.rank in job.header_only
        self.state_sends: list = []
        self.preempted = False
        self.env_failed = False  # the job stopped for an env that failed for good
        self.failed = False  # this rank's own env failed for good: it collects no more
        self.requests: list = []

    def _link(self, module: Any) -> RemoteLinks:
        """The slots to this rank's inference rank, one per group of its envs, for
        ``module``'s acting; each request carries the weights version this rank was told to
        collect with."""
        job = self.job
        region = None if job.memory is None else job.memory.region(job.rank, ACTING)
        groups = job.env_groups
        ends = client_ends(job.channel, job.role.inference, acting_spec(job, module),
                           job.num_envs // groups, groups, job.memory, region)
        self.link = RemoteLinks(ends, lambda: self.collector.weights_version)
        return self.link

    def _send_state(self) -> None:
        """Send this rank's state to the leader without waiting for it to be received.

        ``sent_before`` counts the rollouts this state comes after (one collected but not
        yet sent included; it goes out next), so the learner can take them all before it
        writes the checkpoint. Sends that completed are let go here (each holds its pickled
        state: kept until the end, they grew the rank by one state per checkpoint).
        """
        # a failed env's state is not saved: its place starts afresh from its seed on resume
        state = failed_state(self.job.role) if self.failed else self.collector.state_dict()
        state["sent_before"] = self.sent + int(self.unsent)
        # the version of the weights message that asked for it: rank 0 takes the states of
        # that checkpoint alone (a spare that joined late may answer an older one)
        state["asked_by"] = int(self.weights.version)
        self.state_sends = [r for r in self.state_sends if not self.channel.test(r)]
        self.state_sends.append(self.channel.isend_object(state, 0, TAG_STATE))

    def run(self) -> None:
        """Collect until the STOP command (``scheme.collection``: sync or async), then close the
        inference link and the preemption listener, wait for the state sends and close the envs."""
        try:
            if self.job.scheme.collection == "async":
                self._run_async()
            else:
                self._run_sync()
        finally:
            if self.link is not None:
                self.link.close()
            if self.preempt is not None:
                self.preempt.close()
            for request in self.state_sends:
                self.channel.wait(request)
            self._close_envs()

    def _close_envs(self) -> None:
        """Close the envs (a failed env's close may raise: the job's end must not)."""
        try:
            self.envs.close()
        except Exception:
            if not self.failed:
                raise

    def _stop(self, command: int) -> None:
        """The STOP command came: note why the job stops (every rank leaves with the
        status that says it)."""
        self.preempted = bool(command & PREEMPTED)
        self.env_failed = bool(command & ENV_FAILED)

    def _collect(self, buffer: Any, stop: Any = None) -> None:
        """Fill ``buffer``; where an env fails for good, tell rank 0 and mark the buffer
        failed instead (its learner trains on none of it, and the job stops in order: see
        :mod:`~hpcrl.placement.env_failures`). The rank then collects no more."""
        try:
            self.collector.collect(buffer, should_stop=stop)
        except EnvFailure as err:
            self.failed = True
            self.state_sends.append(tell_leader(self.job, err))
            mark_failed(buffer)

    def _load(self, w: Weights) -> None:
        """Collect with version ``w`` from now on (its normalisers alone when an inference
        rank acts for this rank: the parameters stay there)."""
        if self.header_only:
            w.load_buffers_into(self.module)
            self.collector.follow(w.version)
        else:
            self.collector.load_weights(w)

    def _run_sync(self) -> None:
        w = self.weights
        while True:
            channel = self.channel
            channel.wait(channel.irecv(w.header.data, self.worker, TAG_WEIGHTS))
            if not self.header_only:
                channel.wait(self.params.post())
                self.params.unpack()
            if w.command & CHECKPOINT:
                self._send_state()
            if w.command & STOP:
                self._stop(int(w.command))
                return
            if self.failed:  # it sent its failure: it waits for the job's STOP
                continue
            self._load(w)
            stop = None
            if self.preempt is not None:
                self.preempt.begin(w.version)
                stop = self.preempt.should_stop
            rollout = self.stream.next_buffer()
            self._collect(rollout, stop)
            for request in self.stream.send(rollout):
                channel.wait(request)

    def _service_weights(self) -> bool:
        """Take every weights message that arrived; True once a STOP command came."""
        w = self.weights
        while True:
            if self.requests[1] is None:
                if not self.channel.test(self.requests[0]):
                    return False
                self.requests[1] = (self.requests[0] if self.header_only
                                    else self.params.post())
            self.channel.wait(self.requests[1])
            if not self.header_only:
                self.params.unpack()
            self.requests = [None, None]
            if w.command & CHECKPOINT:
                self._send_state()
            if w.command & STOP:
                self._stop(int(w.command))
                return True
            self._load(w)
            self.requests = [self.channel.irecv(w.header.data, self.worker, TAG_WEIGHTS), None]

    def _run_async(self) -> None:
        channel = self.channel
        self.requests = [channel.irecv(self.weights.header.data, self.worker, TAG_WEIGHTS),
                         None]
        channel.wait(self.requests[0])  # act with the learner's weights from the first step
        pending: list = []
        stopping = self._service_weights()
        while not stopping:
            if self.failed:  # it sent its failure: it answers commands until STOP
                time.sleep(1e-3)
                stopping = self._service_weights()
                continue
            rollout = self.stream.next_buffer()
            self._collect(rollout)
            self.unsent = True
            # the previous rollout may still be in flight: keep answering commands meanwhile
            while pending and not all(channel.test(r) for r in pending) and not stopping:
                stopping = self._service_weights()
                time.sleep(2e-4)
            for request in pending:
                channel.wait(request)
            pending = self.stream.send(rollout)
            self.sent += 1
            self.unsent = False
            if not stopping:
                stopping = self._service_weights()
        for request in pending:
            channel.wait(request)
        channel.send(np.array([self.sent], np.int64), self.worker, TAG_FINAL)

