"""An off-policy learner rank's updates: transitions into a replay, read at the replay ratio.

The data path of an algorithm that learns from a replay (one process, Ape-X, asynchronous
SAC; the families' other one is
:class:`~hpcrl.placement.wiring.rollout_updates.RolloutUpdates`). It runs the loop every
off-policy placement shares (:class:`~hpcrl.learning.replay_loop.ReplayLoop`: chunks into
the replay, gradient steps by the replay-ratio rule, one progress row per update's worth of
env steps) as a learner of the one learner loop (:func:`~hpcrl.learning.loop.run_learner`,
driven by :class:`~hpcrl.placement.ranks.learner_rank.LearnerRank`), over one of two chunk
streams: the collector ranks' (:class:`~hpcrl.exchange.inbox.CollectorInbox`,
newest-weights delivery by :class:`~hpcrl.exchange.latest_weights.LatestWeights`), or,
where it collects itself (one process), its own collector stepped on demand
(:class:`~hpcrl.exchange.chunks_in_process.ChunksInProcess`), with a tolerance of 0: it
collects a chunk only when no gradient step is due, and each chunk ends where the next
training round falls due (every ``replay.train_freq`` steps per env) or where the update
ends. What is its own: how it acts on the leader's command (checkpoint: every collector's
state and every chunk sent before it; stop: drain what is still arriving).

When the learner falls more than ``replay.ratio_tolerance`` gradient steps behind that
ratio, it stops re-posting the receives of the collectors whose chunk it just took; their
synchronous sends then wait, holding them back until the learner caught up (a rate
limiter). With ``ratio_tolerance = -1`` collectors never wait: a learner that cannot keep
up trains all the time at the replay ratio it reaches (column ``replay_ratio``).
"""
from __future__ import annotations

import time
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Protocol

from hpcrl.algorithms import OffPolicyAlgorithm
from hpcrl.collection.collector import transition_collector
from hpcrl.envs.restarts import EnvFailure
from hpcrl.exchange.chunks_in_process import ChunksInProcess
from hpcrl.exchange.inbox import CollectorInbox
from hpcrl.exchange.latest_weights import LatestWeights
from hpcrl.exchange.protocol import CHECKPOINT, TAG_STATE, Control, Report
from hpcrl.exchange.weights import CopyInProcess, SharedInPlace, WeightsSync
from hpcrl.learning.loop import UpdateControl
from hpcrl.learning.replay_learner import ReplayLearner
from hpcrl.learning.replay_loop import ChunkSource, ReplayLoop, UpdateFigures
from hpcrl.numerics.flat import has_flat_parameters
from hpcrl.numerics.reducer import ReducerSlot
from hpcrl.placement.env_failures import failed_state, mark_failed, tell_leader
from hpcrl.placement.leader import Leader
from hpcrl.placement.ranks.job_control import JobControl, collector_state_for
from hpcrl.placement.takeovers import Takeovers
from hpcrl.placement.wiring.feeding import FeedingJob, collectors_of, subscribers_of
from hpcrl.runtime.cpu import retain_freed_memory

if TYPE_CHECKING:  # annotations only
    import torch

    from hpcrl.collection.transition_filler import TransitionSections
    from hpcrl.sections.offpolicy import ReplayConfig
    from hpcrl.sections.schema import TrainConfig


class ReplayJob(FeedingJob, Protocol):
    """What the replay family's data path reads of its learner's job: what any learner of
    collectors reads (:class:`~hpcrl.placement.wiring.feeding.FeedingJob`), the ``replay``
    and ``train`` sections, the learners' communicator, and what its own collector is
    built from (policy, sections, chunk layout)."""

    learners: Any
    device: torch.device

    @property
    def replay(self) -> ReplayConfig:
        """The ``replay`` section (ratio, pacing)."""

    @property
    def train(self) -> TrainConfig:
        """The ``train`` section (``total_env_steps``)."""

    @property
    def transition_sections(self) -> TransitionSections:
        """The sections a transition collector reads."""

    @property
    def steps_per_update(self) -> int:
        """Env steps of the whole job in one update."""

    def new_replay(self) -> Any:
        """The replay of the job's replay learner."""

    def own_chunk_layout(self) -> Any:
        """The layout of the chunks its own collector fills."""


class ReplayUpdates:
    """Holds the replay and the algorithm; talks to every collector of the job. Its one
    learner rank is rank 0, the leader: config validation asks for
    ``scheme.gradient_workers=1`` and no updater rank, so the rank table puts it first."""

    def __init__(self, job: ReplayJob, resume: dict[str, Any] | None, leader: Leader | None,
                 algorithm: OffPolicyAlgorithm, reducer: ReducerSlot) -> None:
        assert leader is not None  # the job's one learner rank is rank 0
        self.job, self.channel, self.leader = job, job.channel, leader
        retain_freed_memory()
        self.learner = ReplayLearner(algorithm, job.new_replay(), job.replay,
                                     job.train.total_env_steps)
        self.actor = algorithm.policy
        self.collectors = collectors_of(job)
        self.local: ChunksInProcess | None = None
        self.failure_sends: list = []  # its own env's failure, told to rank 0
        self.inbox: CollectorInbox | None = None
        self.takeovers: Takeovers | None = None
        self.weights: WeightsSync
        source: ChunkSource
        if job.role.collects:  # one process: its own collector, stepped on demand
            self.local = source = self._collect_here(algorithm)
            tolerance = 0
        else:  # a collector whose receive is not posted is held back (parked)
            self.inbox = source = CollectorInbox(job, self.collectors, job.stream_layout())
            latest = LatestWeights(self.channel, subscribers_of(job), job.header_only,
                                   job.codec, self.inbox.watch)
            self.weights = latest
            # spares that take lost collectors' places (scheme.max_collector_restarts)
            self.takeovers = Takeovers(job, self.inbox, latest, [self.collectors])
            tolerance = job.replay.ratio_tolerance
        self.loop = ReplayLoop(self.learner, job.replay, job.num_envs, job.steps_per_update,
                               source, self.weights, tolerance, lambda: leader.env_steps)
        if resume is not None:
            state = resume["placement"]["updater"]
            self.learner.load_state_dict(state["learner"])
            self.loop.row = UpdateFigures(**state["row"])
            if self.local is not None:
                self.weights.publish(self.actor, self.learner.version)  # (a copy's own)
                saved = collector_state_for(resume, job.role.env_offset)
                # (none where its env had failed for good: its envs start afresh)
                inexact = ([] if saved is None else
                           self.local.collector.load_state_dict(saved))
                if inexact:
                    job.say(f"hpcrl: resumed envs were reset: their state could not be "
                            f"saved ({', '.join(inexact)})")

    def _collect_here(self, algorithm: Any) -> ChunksInProcess:
        """This process's own collector of ``env.num_envs`` envs and its chunk stream; on
        the CPU it acts with the learner's very policy (whose parameters are one flat slice
        of the learner's: a new version copies nothing), elsewhere with a copy."""
        job = self.job
        envs = job.collector_envs()
        shared = job.device.type == "cpu" and has_flat_parameters(algorithm.policy)
        policy = algorithm.policy if shared else job.new_policy()
        collector = transition_collector(envs, policy, job.transition_sections)
        self.weights = (SharedInPlace(collector.follow) if shared else
                        CopyInProcess(policy, collector.load_weights))
        chunk = job.own_chunk_layout().new()
        self.envs = envs
        return ChunksInProcess(collector, chunk, self._chunk_steps,
                               lambda: self.loop.env_steps, self._env_failed)

    def _env_failed(self, err: EnvFailure, chunk: Any) -> None:
        """This process's own env failed for good: rank 0 (itself) is told, and the chunk
        marked failed ends the update (:mod:`~hpcrl.placement.env_failures`)."""
        self.failure_sends.append(tell_leader(self.job, err))
        mark_failed(chunk)

    def _chunk_steps(self) -> int:
        """Steps per env of the next chunk of this process's own collector: up to where the
        next training round falls due, or where the update ends."""
        n = self.job.num_envs
        freq = self.job.replay.train_freq
        since_round = (self.loop.env_steps // n) % freq
        left = (self.loop.per_update - self.loop.row.env_steps) // n
        return min(freq - since_round, left)

    @property
    def env_steps(self) -> int:
        """Env steps of the job that reached the replay."""
        return self.loop.env_steps

    # -- the learner loop --------------------------------------------------------------------
    def control(self) -> UpdateControl:
        """Who decides after each update: rank 0's leader, this very rank."""
        return JobControl(self.job.learners, self.leader)

    def start(self) -> None:
        """Offer the first weights to the collectors."""
        self.weights.publish(self.learner.algorithm.policy, self.learner.version)

    def learn_update(self) -> Report:
        """Take chunks and train until an update's worth of env steps arrived."""
        return self.loop.learn_update(self._too_few_live)

    def _too_few_live(self) -> bool:
        """Fewer collectors live than ``scheme.min_collectors``: the update ends now (the
        leader then checkpoints and stops) instead of waiting for chunks that may never
        come; unless a spare may take a lost one's place."""
        if self.inbox is None or self.takeovers is None:  # one process: none is lost
            return False
        self.takeovers.apply()
        return (self.job.survives and self.inbox.live < self.job.scheme.min_collectors
                and not self.takeovers.awaiting())

    def end_update(self, control: Control) -> None:
        """Deliver any command to every collector with the newest weights; on CHECKPOINT,
        take their states and write."""
        command = int(control.command)
        if command:
            self.weights.publish(self.learner.algorithm.policy, self.learner.version, command,
                                 block=True)
        if command & CHECKPOINT:
            self._checkpoint()

    def finish(self) -> None:
        """Drain what is still arriving (the final evaluation follows)."""
        self._drain()

    def release(self) -> None:
        """After an error in one process: close the envs of its own collector."""
        if self.local is not None:
            self.envs.close()

    def _checkpoint(self) -> None:
        """Take each collector's state and every chunk sent before it, then write."""
        learner_state = {"learner": self.learner.state_dict(), "row": asdict(self.loop.row)}
        if self.local is not None:  # its own collector, between two updates
            own = failed_state(self.job.role) if self.local.failed else self.local.state_dict()
            self.leader.write_checkpoint(self.actor, learner_state, [own])
            return
        assert self.inbox is not None
        states: dict[int, dict[str, Any]] = {}
        watch = self.inbox.watch
        loop = self.loop
        for rank in watch.live:
            watch.waiting(rank, "state")
        while any(rank not in states for rank in watch.live):  # a lost one is not waited for
            envelope = self.channel.probe(tag=TAG_STATE)
            if envelope is None:
                # a spare that joins answers this checkpoint
                if self.takeovers is not None and self.takeovers.apply():
                    for rank in watch.live:
                        watch.waiting(rank, "state")
                watch.check_overdue()
                if not loop.take_chunks(whole=True):
                    time.sleep(1e-3)
                continue
            state = self.channel.recv_object(envelope.source, TAG_STATE)
            if int(state.get("asked_by", self.learner.version)) == self.learner.version:
                states[envelope.source] = state  # (not a late answer to an older one)
                watch.arrived(envelope.source, "state")
        for rank in self.collectors:
            watch.arrived(rank, "state")
        for i, rank in enumerate(self.collectors):
            while (rank in states and not self.inbox.lost(i)
                   and self.inbox.received[i] < states[rank]["sent_before"]):
                if not self.inbox.posted[i]:  # parked, owing a chunk the checkpoint holds
                    self.inbox.post(i)
                if not loop.take_chunks(whole=True):
                    time.sleep(1e-3)
        self.leader.write_checkpoint(self.actor, learner_state, list(states.values()))

    def _drain(self) -> None:
        """After STOP: wait for every collector's final count, dropping late chunks (its own
        collector's envs are closed)."""
        if self.takeovers is not None:
            self.takeovers.apply()  # a spare that took a place gets STOP too
        self.weights.drain()
        if self.inbox is not None:
            self.inbox.drain()
            return
        for request in self.failure_sends:
            self.channel.wait(request)
        try:
            self.envs.close()
        except Exception:
            if self.local is None or not self.local.failed:
                raise
