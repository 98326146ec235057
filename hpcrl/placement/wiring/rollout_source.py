"""Where a gradient worker's rollouts come from: its own envs, or its collector ranks.

- :class:`OwnEnvs` collects on the worker itself; with preemption (DD-PPO) it stops early
  once enough peer workers announced they finished.
- :class:`SyncCollectors` sends weights to each collector and waits for one rollout from
  each, telling the stragglers to stop once enough have arrived.
- :class:`AsyncCollectors` never waits for a particular collector: it takes rollouts as
  they arrive, drops those older than the policy-lag bound and hands out the newest
  weights without ever blocking on a slow collector. Once every one of its collectors is
  lost it is *starved*: its update ends without a batch, and the job checkpoints and stops.

Every source says whether it is starved: once an env it collects with failed for good
(``env_failures``, any source: the job then checkpoints and stops, see
:mod:`~hpcrl.placement.env_failures`), or once every collector was lost (only the
asynchronous one: the others end the job when they lose a collector).
"""
from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from torch import nn

from hpcrl.buffers.rollout import Rollout
from hpcrl.comm.faults import is_peer_failure
from hpcrl.envs.restarts import EnvFailure
from hpcrl.exchange.inbox import CollectorInbox
from hpcrl.exchange.latest_weights import BroadcastWeights, LatestWeights
from hpcrl.exchange.lost_collectors import CollectorWatch, LostCollectorError
from hpcrl.exchange.messages import STOP
from hpcrl.exchange.node_transport import stream_in
from hpcrl.exchange.protocol import TAG_DONE, TAG_PREEMPT
from hpcrl.exchange.weights import CopyInProcess, SharedInPlace, WeightsSync
from hpcrl.models.actor import ActorCritic
from hpcrl.placement.env_failures import failed_state, is_failed, tell_leader
from hpcrl.placement.takeovers import Takeovers
from hpcrl.placement.wiring.feeding import FeedingJob, collectors_of, subscribers_of
from hpcrl.placement.wiring.peer_notices import PeerNotices

if TYPE_CHECKING:  # annotations only
    import torch

    from hpcrl.buffers.rollout import RolloutLayout
    from hpcrl.collection.collector import Collector


class SourceJob(FeedingJob, Protocol):
    """What a gradient worker's rollout source reads of its job: what any learner of
    collectors reads (:class:`~hpcrl.placement.wiring.feeding.FeedingJob`), and what its
    own envs' rollouts are built from (actor, collector, layout, steps)."""

    @property
    def steps_per_collection(self) -> int:
        """Steps of each env in one rollout (``algo.num_steps``)."""

    def layout(self) -> RolloutLayout:
        """The rollout layout of one collector's envs."""

    def new_actor(self, device: torch.device | None = None) -> ActorCritic:
        """A freshly built actor of the job's config."""

    def rollout_collector(self, envs: Any, actor: ActorCritic, engine: Any = None,
                          incarnation: int = 0) -> Collector[Any]:
        """The rollout collector of ``envs`` acting with ``actor``."""


def _preempting(preemption: Any) -> bool:
    """Whether ``scheme.preemption`` lets stragglers stop early."""
    return preemption.fraction_workers < 1.0 or preemption.fraction_samples < 1.0


class OwnEnvs:
    """The worker's own envs, stepped in its process; with ``actor`` (the learner's, on the
    CPU) the collector acts with the learner's weights as they are, without a copy."""

    def __init__(self, job: SourceJob, resume_state: dict[str, Any] | None,
                 actor: ActorCritic | None = None) -> None:
        self.job = job
        self.envs = job.collector_envs()
        self.shared = actor is not None  # the learner's own actor: nothing to copy
        self.collector = job.rollout_collector(self.envs,
                                               actor if actor is not None else job.new_actor())
        if resume_state is not None:
            inexact = self.collector.load_state_dict(resume_state)
            if inexact and job.is_leader:
                job.say(f"hpcrl: resumed envs were reset: their state could not be saved "
                        f"({', '.join(inexact)})")
        # the learner's new versions: noted where the collector acts with its very actor,
        # else copied into the collector's own
        self.sync: WeightsSync = (SharedInPlace(self.collector.follow) if self.shared else
                                  CopyInProcess(self.collector.filler.module,
                                                self.collector.load_weights))
        self.rollout = job.layout().new()
        self.peers = [r for r in job.workers if r != job.rank]
        p = job.scheme.preemption
        self.preempt = _preempting(p) and bool(self.peers)
        self.needed = math.ceil(p.fraction_workers * len(job.workers))
        self.min_steps = math.ceil(p.fraction_samples * job.steps_per_collection)
        self.notice = np.zeros(1, np.int64)
        self.dropped = 0
        self.live_collectors = 1  # this worker itself
        self.starved = False
        self.env_failures = 0  # 1 once an env of its own failed for good
        self.failure_sends: list = []  # its line to rank 0

    def publish(self, policy: nn.Module, version: int, command: int = 0) -> None:
        """The collector acts with ``policy`` at ``version`` from now on."""
        self.sync.publish(policy, version, command)

    def _collect(self, should_stop: Any = None) -> None:
        """Fill the rollout; an env that fails for good is told to rank 0 and leaves this
        source starved (the job then checkpoints and stops: see
        :mod:`~hpcrl.placement.env_failures`)."""
        try:
            self.collector.collect(self.rollout, should_stop=should_stop)
        except EnvFailure as err:
            self.failure_sends.append(tell_leader(self.job, err))
            self.env_failures, self.starved = 1, True

    def gather(self, update: int, version: int) -> tuple[list[Rollout], float, float]:
        """One rollout of the own envs; returns it with collect and wait seconds (none
        once an env failed for good)."""
        if not self.preempt:
            self._collect()
            if self.starved:
                return [], 0.0, 0.0
            return [self.rollout], self.rollout.collect_seconds, 0.0
        channel = self.job.channel
        notices = PeerNotices(channel, len(self.peers), update)

        def should_stop(steps_done: int) -> bool:
            # before its minimum share no notice could stop the rollout: none is looked for
            return steps_done >= self.min_steps and notices.count() >= self.needed

        self._collect(should_stop)  # (a failure still tells the peers it finished)
        self.notice[0] = update
        sends = [channel.isend(self.notice, peer, TAG_DONE) for peer in self.peers]
        started = time.perf_counter()
        notices.wait_all()
        for request in sends:
            channel.wait(request)
        waited = time.perf_counter() - started
        if self.starved:
            return [], 0.0, waited
        return [self.rollout], self.rollout.collect_seconds, waited

    def states(self) -> list[dict[str, Any]]:
        """The collector's state, for a checkpoint (once an env failed for good, none: its
        envs start afresh from their seeds on resume)."""
        failed = self.env_failures
        return [failed_state(self.job.role) if failed else self.collector.state_dict()]

    def close(self, policy: nn.Module, version: int, command: int) -> None:
        """The last version reaches the collector (as STOP carries it to collector ranks),
        then the envs close (a failed env's close may raise: ignored then)."""
        self.sync.publish(policy, version, command)
        for request in self.failure_sends:
            self.job.channel.wait(request)
        try:
            self.envs.close()
        except Exception:
            if not self.env_failures:
                raise


class SyncCollectors:
    """One rollout per update from each collector rank, with straggler preemption."""

    def __init__(self, job: SourceJob) -> None:
        self.job, self.channel = job, job.channel
        self.collectors = collectors_of(job)
        self.subscribers = subscribers_of(job)  # inference ranks, then the collectors
        layout = job.stream_layout()  # the family's unit (rollouts; a plug-in family's own)
        self.streams = [stream_in(job, rank, layout) for rank in self.collectors]
        p = job.scheme.preemption
        self.preempt = _preempting(p)
        self.needed = math.ceil(p.fraction_workers * len(self.collectors))
        self.notice = np.zeros(1, np.int64)
        self.dropped = 0
        self.live_collectors = len(self.collectors)  # a lost one ends the job
        self.starved = False  # a collector's env failed for good: the job stops
        self.env_failures = 0
        # every version to every subscriber: its inference ranks first (a collector's first
        # request waits for them), then its collectors
        self.sync = BroadcastWeights(self.channel, self.subscribers, job.header_only,
                                     job.codec)
        self.timeout = job.scheme.collector_timeout_s

    def publish(self, policy: nn.Module, version: int, command: int = 0) -> None:
        """Send ``policy`` at ``version`` to every subscriber (header only where an inference
        rank acts for it) and wait for the sends."""
        self.sync.publish(policy, version, command)

    def gather(self, update: int, version: int) -> tuple[list[Rollout], float, float]:
        """One rollout from each collector, in collector order; with preemption, the stragglers
        are told to stop once enough arrived. Returns them, the mean collect time and the wait."""
        started = time.perf_counter()
        # last update's rollouts are no longer read: their collectors may write the next
        heads = [stream.post() for stream in self.streams]
        waiting = list(range(len(self.collectors)))
        told = False
        while waiting:
            index = self._next([heads[i] for i in waiting], [self.collectors[i]
                                                            for i in waiting])
            i = waiting.pop(index)
            self.streams[i].take()
            arrived = len(self.collectors) - len(waiting)
            if self.preempt and not told and waiting and arrived >= self.needed:
                self.notice[0] = version
                for j in waiting:
                    self.channel.wait(self.channel.isend(self.notice, self.collectors[j],
                                                         TAG_PREEMPT))
                told = True
        rollouts = [stream.buffer for stream in self.streams]  # in collector order
        self.env_failures = sum(1 for r in rollouts if is_failed(r))
        if self.env_failures:  # the update is not learnt: the job checkpoints and stops
            self.starved = True
            self.dropped += len(rollouts) - self.env_failures
            return [], 0.0, time.perf_counter() - started
        seconds = float(np.mean([r.collect_seconds for r in rollouts]))
        return rollouts, seconds, time.perf_counter() - started

    def _next(self, heads: list[Any], ranks: list[int]) -> int:
        """The index of the next of ``heads`` to arrive; a wait past
        ``scheme.collector_timeout_s`` ends the job naming the collectors still waited for
        (a synchronous learner cannot go on without them)."""
        try:
            index, _ = self.channel.wait_any(
                heads, timeout=self.timeout if self.timeout > 0 else None)
        except TimeoutError:
            names = ", ".join(f"rank {r} on {self._host(r)}" for r in ranks)
            raise LostCollectorError(
                f"no rollout from collector {names} for {self.timeout:g} s "
                f"(scheme.collector_timeout_s): hung, stopped or cut off; a synchronous "
                f"scheme cannot go on without it, so the job ends (resume it from its last "
                f"checkpoint)") from None
        return index

    def _host(self, rank: int) -> str:
        peers = self.job.peers
        return peers[rank].host if peers is not None else "its node"

    def states(self) -> list[dict[str, Any]]:
        """``[]``: collector ranks send their states to the leader themselves."""
        return []  # collectors send their own to the leader

    def close(self, policy: nn.Module, version: int, command: int) -> None:
        """Send the last version with STOP: the collectors leave on it."""
        self.sync.publish(policy, version, command | STOP)


class AsyncCollectors:
    """Rollouts as they arrive from any collector, within the policy-lag bound, trained on
    where they landed: a collector's rollout is held (its next receive not posted) until the
    update that trains on it is done."""

    def __init__(self, job: SourceJob) -> None:
        self.job, self.channel = job, job.channel
        self.collectors = collectors_of(job)
        self.layout = job.layout()
        self.watch = CollectorWatch(job, self.collectors)
        self.inbox = CollectorInbox(job, self.collectors, self.layout, self.watch)
        self.size = len(self.collectors)  # rollouts per update
        self.held: list[int] = []  # collectors whose rollout the current update reads
        self.taken: list[Rollout] = []  # the current update's rollouts
        self.spares: list[Rollout] = []  # copies, where a collector gives two in an update
        self.sync = LatestWeights(self.channel, subscribers_of(job), job.header_only,
                                  job.codec, self.watch)
        # spares that take lost collectors' places (scheme.max_collector_restarts)
        self.takeovers = Takeovers(job, self.inbox, self.sync, [self.collectors],
                                   busy=lambda i: i in self.held)
        self.max_lag = job.scheme.max_policy_lag
        self.dropped = 0
        self.restarts_dropped = 0  # env restarts of dropped rollouts, not yet reported
        self.starved = False  # every collector was lost: no batch can be filled any more
        self.env_failures = 0  # collectors whose env failed for good (the job then stops)
        self.copied_bytes = 0  # rollout bytes copied here (only to take two of a collector)

    @property
    def live_collectors(self) -> int:
        """This worker's collectors not lost: the batch of an update is filled by them."""
        return self.inbox.live

    def publish(self, policy: nn.Module, version: int, command: int = 0) -> None:
        """Offer the newest weights; a collector still reading older ones gets these as
        soon as it is free (see :mod:`~hpcrl.exchange.latest_weights`).

        A message carrying a command (checkpoint) is delivered to every collector, waiting
        for the previous one to be taken if need be (collectors take messages between and
        during rollouts, so that wait is short).
        """
        self.sync.publish(policy, version, command, block=command != 0)

    def gather(self, update: int, version: int) -> tuple[list[Rollout], float, float]:
        """As many rollouts as there are collectors, from whichever arrive first, dropping (and
        counting) those more than ``scheme.max_policy_lag`` versions old; pushes weights while
        waiting. Returns them, the mean collect time and the wait. With collectors lost, the
        live ones fill the batch (one may give two rollouts of an update); once none is live
        the source is :attr:`starved` and returns no rollout (those of the unfilled batch are
        dropped: an update trains on a whole batch or none)."""
        started = time.perf_counter()
        self._release()
        self.takeovers.apply()
        taken = self.taken = []
        while len(taken) < self.size:
            i = self.inbox.next(idle=self._idle)
            if i is None:
                if not self.held and self.takeovers.awaiting():
                    self.takeovers.wait()  # a spare may take a lost collector's place
                    continue
                if not self.held:  # nothing held, nothing can arrive: no collector is live
                    self.starved = True
                    self.dropped += len(taken)
                    return [], 0.0, time.perf_counter() - started
                # every live collector's rollout is held: copy one out so that its
                # collector can give another (collectors were lost)
                self._copy_out(self.held[-1])
                continue
            rollout = self.inbox.buffers[i]
            if is_failed(rollout):  # its collector collects no more: the job stops
                self.env_failures += 1
                self.starved = True
                self.dropped += len(taken)
                return [], 0.0, time.perf_counter() - started
            if version - rollout.weights_version > self.max_lag:
                self.dropped += 1
                self.restarts_dropped += rollout.env_restarts  # counted with the next taken
                self.inbox.post(i)
            else:
                rollout.facts.env_restarts += self.restarts_dropped
                self.restarts_dropped = 0
                taken.append(rollout)  # read in place: its collector's receive waits
                self.held.append(i)
            self.sync.push()
        seconds = float(np.mean([r.collect_seconds for r in taken]))
        return taken, seconds, time.perf_counter() - started

    def _idle(self) -> None:
        """While the batch waits: deliver weights, and never let a slow collector hold the
        update back while a fast one, whose last rollout the batch holds, has sent its
        next (that held rollout is copied out, the fast collector's next received)."""
        self.service()
        for i in list(self.held):
            if self.inbox.lost(i):
                continue
            try:
                waiting = self.inbox.streams[i].next_waiting()
            except Exception as exc:  # (a job that survives lost collectors)
                if not is_peer_failure(exc):
                    raise
                self.watch.lose(self.collectors[i])
                continue
            if waiting:
                self._copy_out(i)

    def service(self) -> None:
        """Take rank 0's word on spares that took lost collectors' places, and deliver the
        newest weights (while the learner waits, a checkpoint's states included)."""
        self.takeovers.apply()
        self.sync.push()

    def after_update(self) -> None:
        """While rank 0 waits for the collectors' checkpoint states, the update done: its
        rollouts are no longer read, so their collectors' next receives are posted (a spare
        that took the place of a collector whose rollout the update held is let in now, to
        take the checkpoint's message and answer it, instead of at the next update, which
        would wait for that answer), and the newest weights delivered."""
        self._release()
        self.service()

    def _copy_out(self, i: int) -> None:
        """Copy collector ``i``'s rollout the batch holds into a spare buffer and post its
        next receive: the one copy asynchronous collection makes, where a collector gives
        two rollouts of one update."""
        rollout = self.inbox.buffers[i]
        spare = sum(1 for r in self.taken if any(r is s for s in self.spares))
        if spare == len(self.spares):
            self.spares.append(self.layout.new())
        copy = self.spares[spare]
        copy.data[:], copy.header[:] = rollout.data, rollout.header
        self.copied_bytes += rollout.data.nbytes
        self.taken[next(k for k, r in enumerate(self.taken) if r is rollout)] = copy
        self.held.remove(i)
        self.inbox.post(i)

    def _release(self) -> None:
        """The last update's rollouts are no longer read: post their collectors' next
        receives."""
        for i in self.held:
            self.inbox.post(i)
        self.held = []

    def states(self) -> list[dict[str, Any]]:
        """``[]``: collector ranks send their states to the leader themselves."""
        return []

    def close(self, policy: nn.Module, version: int, command: int) -> None:
        """Deliver STOP, then drain every rollout still in flight until each FINAL count."""
        self.takeovers.apply()  # a spare that took a place is stopped too
        self.sync.publish(policy, version, command | STOP, block=True)
        self.sync.drain()
        self.held = []  # the drain posts and takes every collector's last messages
        self.inbox.drain()
