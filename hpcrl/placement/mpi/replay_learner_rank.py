"""The learner rank of an off-policy scheme (Ape-X, asynchronous SAC): replay and updates.

It runs the loop every off-policy placement shares (:class:`~hpcrl.learning.replay_loop.
ReplayLoop`: chunks into the replay, gradient steps by the replay-ratio rule, one progress row
per update's worth of env steps) over the collector ranks' streams
(:class:`~hpcrl.placement.mpi.inbox.CollectorInbox`) and newest-weights delivery
(:class:`~hpcrl.placement.mpi.latest_weights.LatestWeights`), as a learner of the one learner
loop (:func:`~hpcrl.learning.loop.run_learner`). What is its own: how it acts on the leader's
command (checkpoint: every collector's state and every chunk sent before it; stop: drain what
is still arriving).

When the learner falls more than ``replay.ratio_tolerance`` gradient steps behind that
ratio, it stops re-posting the receives of the collectors whose chunk it just took; their
synchronous sends then wait, holding them back until the learner caught up (a rate
limiter). With ``ratio_tolerance = -1`` collectors never wait: a learner that cannot keep
up trains all the time at the replay ratio it reaches (column ``replay_ratio``).
"""
from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any

from hpcrl.core.algorithms.offpolicy import make_offpolicy_algorithm
from hpcrl.core.compiling import compile_loss
from hpcrl.learning.loop import run_learner
from hpcrl.learning.replay_loop import ReplayLoop, UpdateFigures
from hpcrl.placement.mpi.inbox import CollectorInbox
from hpcrl.placement.mpi.job import MpiJob
from hpcrl.placement.mpi.latest_weights import LatestWeights
from hpcrl.placement.mpi.leader import Leader
from hpcrl.placement.mpi.learners import JobControl
from hpcrl.placement.mpi.takeovers import Takeovers
from hpcrl.roles.protocol import CHECKPOINT, TAG_STATE, Control, Report
from hpcrl.roles.replay_learner import ReplayLearner, make_replay
from hpcrl.runtime.cpu import retain_freed_memory


class ReplayLearnerRank:
    """Holds the replay and the algorithm; talks to every collector of the job."""

    def __init__(self, job: MpiJob, resume: dict[str, Any] | None, leader: Leader) -> None:
        cfg, spaces = job.config, job.spaces
        self.job, self.channel, self.leader = job, job.channel, leader
        retain_freed_memory()
        algorithm = make_offpolicy_algorithm(cfg, spaces, job.device)
        if cfg.train.compile:
            compile_loss(algorithm, job.device)
        replay = make_replay(cfg, spaces.obs_shape, spaces.action_shape, spaces.discrete,
                             spaces.obs_format.dtype, spaces.obs_format,
                             streams=job.total_envs)
        self.learner = ReplayLearner(algorithm, replay, cfg)
        self.actor = algorithm.policy
        self.collectors = job.my_collectors
        # a collector whose receive is not posted is held back (parked)
        self.inbox = CollectorInbox(job, self.collectors, job.stream_layout())
        self.weights = LatestWeights(self.channel, job.my_subscribers, job.header_only,
                                     job.codec, self.inbox.watch)
        self.loop = ReplayLoop(self.learner, cfg, job.total_envs, self.inbox, self.weights,
                               cfg.replay.ratio_tolerance, lambda: leader.env_steps)
        # spares that take lost collectors' places (scheme.max_collector_restarts)
        self.takeovers = Takeovers(job, self.inbox, self.weights, [self.collectors])
        self.preempted = False
        if resume is not None:
            state = resume["placement"]["updater"]
            self.learner.load_state_dict(state["learner"])
            self.loop.row = UpdateFigures(**state["row"])

    @property
    def env_steps(self) -> int:
        """Env steps of the job that reached the replay."""
        return self.loop.env_steps

    # -- the learner loop --------------------------------------------------------------------
    def run(self) -> None:
        """Until STOP: one update of the replay loop at a time (it ends early when too few
        collectors are live), then the leader's command
        (:func:`~hpcrl.learning.loop.run_learner`)."""
        run_learner(self, JobControl(self.job, self.leader))

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
        self.takeovers.apply()
        return (self.job.survives and self.inbox.live < self.job.config.scheme.min_collectors
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
        """Drain what is still arriving, then the final evaluation."""
        self._drain()
        self.leader.finish(self.actor)

    def _checkpoint(self) -> None:
        """Take each collector's state and every chunk sent before it, then write."""
        states: dict[int, dict[str, Any]] = {}
        watch = self.inbox.watch
        loop = self.loop
        for rank in watch.live:
            watch.waiting(rank, "state")
        while any(rank not in states for rank in watch.live):  # a lost one is not waited for
            envelope = self.channel.probe(tag=TAG_STATE)
            if envelope is None:
                if self.takeovers.apply():  # a spare that joins answers this checkpoint
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
        learner_state = {"learner": self.learner.state_dict(), "row": asdict(loop.row)}
        self.leader.write_checkpoint(self.actor, learner_state, list(states.values()))

    def _drain(self) -> None:
        """After STOP: wait for every collector's final count, dropping late chunks."""
        self.takeovers.apply()  # a spare that took a place gets STOP too
        self.weights.drain()
        self.inbox.drain()
