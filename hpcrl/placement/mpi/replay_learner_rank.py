"""The learner rank of an off-policy scheme (Ape-X, asynchronous SAC): replay and updates.

One loop, read top to bottom:

1. take every transition chunk that arrived from the collectors into the replay;
2. take gradient steps while the learner is behind the replay ratio of the config
   (``replay.gradient_steps`` per ``replay.train_freq`` steps of ``env.num_envs`` envs, the
   same ratio as in one process), then offer the new weights to the collectors (those busy
   get them as soon as they are free);
3. once an update's worth of env steps arrived (``algo.num_steps`` per env of the job),
   record a progress row and act on the leader's command: checkpoint, stop.

When the learner falls more than ``replay.ratio_tolerance`` gradient steps behind that
ratio, it stops re-posting the receives of the collectors whose chunk it just took; their
synchronous sends then wait, holding them back until the learner caught up (a rate
limiter). With ``ratio_tolerance = -1`` collectors never wait: a learner that cannot keep
up trains all the time at the replay ratio it reaches (column ``replay_ratio``).
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from hpcrl.comm import probe_any
from hpcrl.core.algorithms.offpolicy import make_offpolicy_algorithm
from hpcrl.placement.mpi.inbox import CollectorInbox
from hpcrl.placement.mpi.job import MpiJob
from hpcrl.placement.mpi.latest_weights import LatestWeights
from hpcrl.placement.mpi.leader import Leader
from hpcrl.placement.mpi.protocol import (
    CHECKPOINT,
    PREEMPTED,
    STOP,
    TAG_STATE,
    Report,
    ReportLayout,
)
from hpcrl.roles.replay_learner import ReplayLearner, make_replay
from hpcrl.runtime.cpu import retain_freed_memory


@dataclass
class UpdateFigures:
    """What arrived and what was trained since the last progress row."""

    env_steps: int = 0
    chunks: int = 0
    episodes: int = 0
    return_sum: float = 0.0
    length_sum: float = 0.0
    lag_sum: float = 0.0
    collect_s: float = 0.0
    wait_s: float = 0.0
    compute_s: float = 0.0
    comm_s: float = 0.0
    gradient_steps: int = 0
    applied_steps: int = 0  # gradient steps not dropped for a non-finite gradient
    skipped_updates: int = 0
    grad_norm_sum: float = 0.0
    rounds: int = 0
    stats: dict[str, float] = field(default_factory=dict)


class ReplayLearnerRank:
    """Holds the replay and the algorithm; talks to every collector of the job."""

    def __init__(self, job: MpiJob, resume: dict[str, Any] | None, leader: Leader) -> None:
        cfg, spaces = job.config, job.spaces
        self.job, self.world, self.leader = job, job.world, leader
        retain_freed_memory()
        algorithm = make_offpolicy_algorithm(cfg, spaces, job.device)
        replay = make_replay(cfg, spaces.obs_shape, spaces.action_shape, spaces.discrete,
                             spaces.obs_format.dtype, spaces.obs_format,
                             streams=job.total_envs)
        self.learner = ReplayLearner(algorithm, replay, cfg)
        self.actor = algorithm.policy
        self.collectors = job.my_collectors
        # a collector whose receive is not posted is held back (parked)
        self.inbox = CollectorInbox(job, self.collectors, job.stream_layout())
        self.weights = LatestWeights(self.world, job.my_subscribers, job.header_only,
                                     job.codec, self.inbox.watch)
        r = cfg.replay
        self.tolerance = r.ratio_tolerance
        per_round = r.gradient_steps if r.gradient_steps >= 0 else r.train_freq * cfg.env.num_envs
        self.round = max(per_round, 1)
        self.ratio = per_round / (r.train_freq * cfg.env.num_envs)
        self.per_update = cfg.algo.num_steps * job.total_envs
        self.layout = ReportLayout(self.learner.stat_names)
        self.row = UpdateFigures()
        self.preempted = False
        if resume is not None:
            state = resume["placement"]["updater"]
            self.learner.load_state_dict(state["learner"])
            self.row = UpdateFigures(**state["row"])

    # -- chunks ------------------------------------------------------------------------------
    @property
    def env_steps(self) -> int:
        """Env steps of the job that reached the replay."""
        return self.leader.env_steps + self.row.env_steps

    def _holding(self) -> bool:
        """Whether the learner is too far behind the replay ratio to take more chunks."""
        return self.tolerance >= 0 and self._due_steps() > self.tolerance

    def _take_chunks(self, whole: bool = False) -> int:
        """Receive the chunks that arrived into the replay, up to a full update's worth
        unless ``whole``; while the learner is behind, a collector whose chunk was taken
        is parked. Whether it is behind is asked again after every chunk: a chunk taken
        can put it behind, and re-posting then would let that collector's next chunk in
        (one more per collector and pass, past the tolerance)."""
        started, taken = time.perf_counter(), 0
        limit = float("inf") if whole else self.per_update
        inbox = self.inbox
        for i in range(len(self.collectors)):
            if not inbox.posted[i] and not self._holding():
                inbox.post(i)  # let a parked collector go
            while self.row.env_steps < limit and inbox.arrived(i):
                self._add(inbox.buffers[i])
                taken += 1
                if self._holding():
                    break  # parked: its next send waits until the receive is posted
                inbox.post(i)
        self.row.comm_s += time.perf_counter() - started
        return taken

    def _add(self, chunk: Any) -> None:
        self.learner.add(chunk)
        row = self.row
        returns, lengths = chunk.finished_episodes()
        row.env_steps += chunk.env_steps
        row.chunks += 1
        row.episodes += len(returns)
        row.return_sum += float(returns.sum())
        row.length_sum += float(lengths.sum())
        row.lag_sum += self.learner.version - chunk.weights_version
        row.collect_s += chunk.collect_seconds

    # -- training ----------------------------------------------------------------------------
    def _due_steps(self) -> int:
        """Gradient steps the replay ratio asks for that were not taken yet."""
        if not self.learner.ready(self.env_steps):
            return 0
        target = self.ratio * (self.env_steps - self.job.config.replay.learning_starts)
        return int(target) - self.learner.version

    def _train(self) -> bool:
        """At most one round of due gradient steps, then offer the new weights."""
        n = min(self._due_steps(), self.round)
        if n <= 0:
            return False
        started = time.perf_counter()
        stats = self.learner.train(n, self.env_steps)
        row = self.row
        skipped = self.learner.algorithm.guard.take_skipped()
        row.gradient_steps += n
        row.applied_steps += n - skipped
        row.skipped_updates += skipped
        row.rounds += 1
        row.grad_norm_sum += stats.pop("grad_norm", 0.0) * (n - skipped)  # mean of applied
        stats.pop("learning_rate", None)
        for name, value in stats.items():
            row.stats[name] = row.stats.get(name, 0.0) + value
        t = time.perf_counter()
        row.compute_s += t - started
        self.weights.offer(self.learner.weights(), block=False)
        row.comm_s += time.perf_counter() - t
        return True

    # -- records -----------------------------------------------------------------------------
    def _report(self) -> Report:
        row = self.row
        report = self.layout.new()
        self.layout.fill(
            report, env_steps=row.env_steps, episodes=row.episodes, return_sum=row.return_sum,
            length_sum=row.length_sum, policy_lag=row.lag_sum / max(row.chunks, 1),
            time_collect_s=row.collect_s / max(row.chunks, 1), time_wait_s=row.wait_s,
            time_compute_s=row.compute_s, time_communicate_s=row.comm_s,
            gradients=1, applied=row.applied_steps, grad_norm_sum=row.grad_norm_sum,
            skipped_updates=row.skipped_updates,
            learning_rate=self.learner.algorithm.learning_rate,
            live_collectors=self.inbox.live,
            replay_ratio=row.gradient_steps / max(row.env_steps, 1))
        for name, value in row.stats.items():
            report[self.layout.index(name)] = value / row.rounds
        return report

    # -- the loop ----------------------------------------------------------------------------
    def run(self) -> None:
        """Until STOP: take the collectors' chunks into the replay, train the rounds due, push
        the newest weights and end an update every ``per_update`` env steps; backs off while
        idle, then drains what is still arriving."""
        self.weights.offer(self.learner.weights(), block=False)
        idle = 50e-6
        while True:
            busy = self._take_chunks() > 0
            busy = self._train() or busy
            self.weights.push()
            if self.row.env_steps >= self.per_update or self._too_few_live():
                command = self._end_update()
                if command & STOP:
                    break
            if busy:
                idle = 50e-6
            else:
                time.sleep(idle)
                self.row.wait_s += idle
                idle = min(idle * 2, 2e-3)
        self._drain()
        self.leader.finish(self.actor)

    def _too_few_live(self) -> bool:
        """Fewer collectors live than ``scheme.min_collectors``: the update ends now (the
        leader then checkpoints and stops) instead of waiting for chunks that may never
        come."""
        return self.job.survives and self.inbox.live < self.job.config.scheme.min_collectors

    def _end_update(self) -> int:
        self.leader.record(self._report()[None, :])
        self.row = UpdateFigures()
        command = self.leader.control()
        self.preempted = bool(command & PREEMPTED)
        if command:
            message = self.learner.weights()
            self.weights.offer(message.set_command(command), block=True)
        if command & CHECKPOINT:
            self._checkpoint()
        return command

    def _checkpoint(self) -> None:
        """Take each collector's state and every chunk sent before it, then write."""
        states: dict[int, dict[str, Any]] = {}
        watch = self.inbox.watch
        for rank in watch.live:
            watch.waiting(rank, "state")
        while any(rank not in states for rank in watch.live):  # a lost one is not waited for
            envelope = probe_any(self.world, tag=TAG_STATE)
            if envelope is None:
                watch.check_overdue()
                if not self._take_chunks(whole=True):
                    time.sleep(1e-3)
                continue
            states[envelope.source] = self.world.recv(source=envelope.source, tag=TAG_STATE)
            watch.arrived(envelope.source, "state")
        for rank in self.collectors:
            watch.arrived(rank, "state")
        for i, rank in enumerate(self.collectors):
            while (rank in states and not self.inbox.lost(i)
                   and self.inbox.received[i] < states[rank]["sent_before"]):
                if not self.inbox.posted[i]:  # parked, owing a chunk the checkpoint holds
                    self.inbox.post(i)
                if not self._take_chunks(whole=True):
                    time.sleep(1e-3)
        learner_state = {"learner": self.learner.state_dict(), "row": asdict(self.row)}
        self.leader.write_checkpoint(self.actor, learner_state, list(states.values()))

    def _drain(self) -> None:
        """After STOP: wait for every collector's final count, dropping late chunks."""
        self.weights.drain()
        self.inbox.drain()
