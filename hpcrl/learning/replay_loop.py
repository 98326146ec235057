"""The off-policy learner's loop, one for every placement: chunks in, gradient steps by the
replay-ratio rule, one progress row per update's worth of env steps.

The loop does not know where its chunks come from or where its weights go. A
:class:`ChunkSource` hands it chunks (the collector ranks' streams under MPI,
:class:`~hpcrl.exchange.inbox.CollectorInbox`; the collector in this very process in a
serial run, :class:`~hpcrl.exchange.chunks_in_process.ChunksInProcess`) and a
:class:`~hpcrl.exchange.weights.WeightsSync` takes each new policy (newest-weights delivery
to those ranks, or that collector's own policy, unchanged or loaded). So a one-process run
and an Ape-X job train by the same rule:

* **the replay ratio.** Training starts once the job collected more than
  ``replay.learning_starts`` env steps; from then on a round of ``replay.gradient_steps``
  gradient steps is due for every ``replay.train_freq`` steps of ``env.num_envs`` envs the
  job collected (every multiple of that count past ``learning_starts``). The loop takes at
  most one round at a time and counts the steps it took, applied or dropped by the gradient
  guard, so a dropped step is not taken again.
* **holding collectors back.** When the steps due exceed ``tolerance``, the loop stops
  taking chunks from the collectors whose chunk it just took until it caught up. A serial
  run's tolerance is 0: its collector collects a chunk only when no step is due, and each
  chunk ends where the next round falls due, so it trains exactly every ``train_freq`` steps.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from hpcrl.exchange.protocol import Report, ReportLayout
from hpcrl.exchange.weights import WeightsSync
from hpcrl.learning.replay_learner import ReplayLearner
from hpcrl.sections.offpolicy import ReplayConfig


class ChunkSource(Protocol):
    """Where a replay learner's transition chunks come from: one standing "receive" per
    collector. ``posted[i]``: collector ``i`` may hand a chunk (a learner holding it back
    leaves it unposted); ``buffers[i]``: where its last chunk lies once it :meth:`arrived`."""

    posted: list[bool]
    # seconds spent collecting inside :meth:`arrived` (a collector in this very process),
    # which are collection, not communication; 0 for chunks that come over a transport
    local_seconds: float

    @property
    def buffers(self) -> list[Any]:
        """Each collector's last chunk (once it arrived)."""
        ...

    @property
    def live(self) -> int:
        """How many collectors are live."""
        ...

    def arrived(self, i: int) -> bool:
        """Whether collector ``i``'s next chunk is in its buffer now."""
        ...

    def post(self, i: int) -> None:
        """Let collector ``i`` hand its next chunk (its last one is no longer read)."""
        ...

    def drain(self) -> None:
        """At the end of the job: drop what is still arriving."""
        ...


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
    env_restarts: int = 0  # envs made again while the chunks were collected
    env_failures: int = 0  # collectors whose env failed for good (the job then stops)
    stats: dict[str, float] = field(default_factory=dict)


def round_rule(r: ReplayConfig, num_envs: int) -> tuple[int, int]:
    """``(gradient steps per round, job env steps per round)`` of the ``replay`` section
    ``r``: a round of ``replay.gradient_steps`` (``-1``: as many as env steps) per
    ``replay.train_freq`` steps of ``num_envs`` envs (``env.num_envs``)."""
    every = r.train_freq * num_envs
    return (r.gradient_steps if r.gradient_steps >= 0 else every), every


class ReplayLoop:
    """The learner of an off-policy job: ``learner`` fed by ``source``, publishing to
    ``sink``, at the replay ratio of the ``replay`` section ``keys`` over ``num_envs`` envs
    a collector (``env.num_envs``); an update is ``update_env_steps`` env steps of the job
    (``algo.num_steps`` steps of each of its envs). ``base_env_steps()`` gives the job's
    env steps counted before the current update (the leader's, or the serial trainer's,
    count)."""

    def __init__(self, learner: ReplayLearner, keys: ReplayConfig, num_envs: int,
                 update_env_steps: int, source: ChunkSource, sink: WeightsSync,
                 tolerance: int, base_env_steps: Callable[[], int]) -> None:
        self.learner, self.source, self.sink = learner, source, sink
        self.tolerance = tolerance
        self.base_env_steps = base_env_steps
        self.learning_starts = keys.learning_starts
        self.per_round, self.round_env_steps = round_rule(keys, num_envs)
        self.per_update = update_env_steps
        self.layout = ReportLayout(learner.stat_names)
        self.row = UpdateFigures()

    # -- chunks ------------------------------------------------------------------------------
    @property
    def env_steps(self) -> int:
        """Env steps of the job that reached the replay."""
        return self.base_env_steps() + self.row.env_steps

    def holding(self) -> bool:
        """Whether the learner is too far behind the replay ratio to take more chunks."""
        return self.tolerance >= 0 and self.due_steps() > self.tolerance

    def take_chunks(self, whole: bool = False) -> int:
        """Take the chunks that arrived into the replay, up to a full update's worth unless
        ``whole``; while the learner is behind, a collector whose chunk was taken is held
        back. Whether it is behind is asked again after every chunk: a chunk taken can put
        it behind, and letting that collector go on would let its next chunk in (one more
        per collector and pass, past the tolerance)."""
        source = self.source
        started, local, taken = time.perf_counter(), source.local_seconds, 0
        limit = float("inf") if whole else self.per_update
        for i in range(len(source.posted)):
            if not source.posted[i] and not self.holding():
                source.post(i)  # let a held collector go
            while self.row.env_steps < limit and source.arrived(i):
                if source.buffers[i].facts.env_failed:  # it collects no more: the job stops
                    self.row.env_failures += 1
                    break
                self._add(source.buffers[i])
                taken += 1
                if self.holding():
                    break  # held: its next chunk waits until it is let go
                source.post(i)
        self.row.comm_s += time.perf_counter() - started - (source.local_seconds - local)
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
        row.env_restarts += chunk.env_restarts

    # -- training ----------------------------------------------------------------------------
    def due_steps(self) -> int:
        """Gradient steps the replay ratio asks for that were not taken yet: a round for every
        multiple of the round's env steps past ``replay.learning_starts``."""
        steps = self.env_steps
        if not self.learner.ready(steps):
            return 0
        every = self.round_env_steps
        rounds = steps // every - self.learning_starts // every
        return self.per_round * rounds - self.learner.steps_taken

    def train(self) -> bool:
        """At most one round of due gradient steps, then offer the new weights."""
        n = min(self.due_steps(), self.per_round)
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
        stats.pop("learning_rate", None)  # the row reports the rate at the update's end
        for name, value in stats.items():
            row.stats[name] = row.stats.get(name, 0.0) + value
        t = time.perf_counter()
        row.compute_s += t - started
        self.sink.publish(self.learner.algorithm.policy, self.learner.version)
        row.comm_s += time.perf_counter() - t
        return True

    # -- one update --------------------------------------------------------------------------
    def learn_update(self, ends_early: Callable[[], bool] = lambda: False) -> Report:
        """Take chunks and train the rounds due until an update's worth of env steps arrived
        (or ``ends_early()``, or a collector's env failed for good); backs off while nothing
        arrives. Returns the update's report
        and starts the next row."""
        idle = 50e-6
        while True:
            busy = self.take_chunks() > 0
            busy = self.train() or busy
            self.sink.push()
            if self.row.env_steps >= self.per_update or self.row.env_failures or ends_early():
                report = self.report()
                self.row = UpdateFigures()
                return report
            if busy:
                idle = 50e-6
            else:
                time.sleep(idle)
                self.row.wait_s += idle
                idle = min(idle * 2, 2e-3)

    def report(self) -> Report:
        """The progress figures of the row so far."""
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
            live_collectors=self.source.live, env_restarts=row.env_restarts,
            env_failures=row.env_failures,
            replay_ratio=row.gradient_steps / max(row.env_steps, 1))
        for name, value in row.stats.items():
            report[self.layout.index(name)] = value / row.rounds
        return report
