"""Evaluation during training on rank 0 (``train.eval_every``), in a thread.

Every ``eval_every`` env steps the writer hands a copy of the policy (on the CPU) to a
thread that plays ``train.eval_episodes`` deterministic episodes, the same ones as the final
evaluation, while training goes on: in an MPI job the other ranks never wait for it. Each
evaluation goes to the run's :class:`~hpcrl.learning.eval_curve.EvalCurve` (a row of
``eval.csv``; ``checkpoints/best.pt`` when it is the best so far).

Snapshots are evaluated in order, none dropped, so ``eval.csv`` has one row per due point
whatever the speed of either side; the run waits for the last ones before it ends.
"""
from __future__ import annotations

import copy
import queue
import threading
from collections.abc import Callable
from typing import IO, Any

from torch import nn

from hpcrl.learning.eval_curve import EvalCurve, EvalPoint
from hpcrl.runtime.run_dir import RunDir
from hpcrl.sections.schema import TrainConfig

LAG_WARNING = 3  # snapshots waiting before the run says the evaluations fall behind


#: ``evaluate(actor, episodes)``: the run's evaluation (:func:`hpcrl.learning.evaluation.evaluate`
#: over its env), what the evaluator calls on each snapshot
Evaluation = Callable[[nn.Module, int], dict[str, Any]]


def next_due(env_steps: int, every: int) -> int:
    """The first multiple of ``every`` env steps past ``env_steps``: the next evaluation's."""
    return (env_steps // every + 1) * every


class PeriodicEvaluator:
    """Evaluates snapshots of the policy in a thread, writing ``eval.csv`` and ``best.pt``."""

    def __init__(self, train: TrainConfig, evaluate: Evaluation, run: RunDir, env_steps: int,
                 resumed: bool, saved_policy: Callable[[nn.Module], dict[str, Any]],
                 console: IO[str] | None) -> None:
        """Evaluate every ``train.eval_every`` env steps for ``train.eval_episodes``
        episodes with ``evaluate`` (the run's :func:`hpcrl.learning.evaluation.evaluate`), appending
        to ``eval.csv`` (cut back to ``env_steps`` when ``resumed``)."""
        self.console, self.evaluate = console, evaluate
        self.every, self.episodes = train.eval_every, train.eval_episodes
        self.saved_policy = saved_policy
        self.next_at = next_due(env_steps, self.every)
        self.curve = EvalCurve(run, env_steps, resumed, console)
        self.snapshots: queue.Queue = queue.Queue()
        self.error: BaseException | None = None
        self.warned = False
        self.thread = threading.Thread(target=self._work, name="hpcrl-eval", daemon=True)
        self.thread.start()

    def due(self, env_steps: int) -> bool:
        """Whether the run has crossed the next ``eval_every`` boundary."""
        return env_steps >= self.next_at

    def submit(self, actor: nn.Module, env_steps: int, updates: int,
               wall_time_s: float) -> None:
        """Evaluate a copy of ``actor`` as it is now (taken before this returns)."""
        self._raise()
        snapshot = copy.deepcopy(actor).to("cpu")
        self.next_at = next_due(env_steps, self.every)
        self.snapshots.put((snapshot, env_steps, updates, wall_time_s, None))
        if self.snapshots.qsize() >= LAG_WARNING and not self.warned and self.console:
            self.warned = True
            print(f"hpcrl: warning: {self.snapshots.qsize()} evaluations wait behind the one "
                  f"running: raise train.eval_every or lower train.eval_episodes",
                  file=self.console, flush=True)

    def record_final(self, actor: nn.Module, env_steps: int, updates: int,
                     wall_time_s: float, result: dict[str, Any]) -> None:
        """The run's final evaluation as the curve's last row (not evaluated again), after
        the evaluations still waiting."""
        self.close()
        self._evaluate(actor, env_steps, updates, wall_time_s, result)

    def close(self) -> None:
        """Wait for the evaluations handed over so far; raise what failed in the thread."""
        if self.thread.is_alive():
            self.snapshots.put(None)
            self.thread.join()
        self._raise()

    def _raise(self) -> None:
        if self.error is not None:
            error, self.error = self.error, None
            raise error

    def _work(self) -> None:
        while True:
            item = self.snapshots.get()
            if item is None:
                return
            if self.error is not None:
                continue  # the first failure is reported; the rest are not evaluated
            try:
                self._evaluate(*item)
            except BaseException as err:  # raised in the training thread at its next call
                self.error = err

    def _evaluate(self, actor: nn.Module, env_steps: int, updates: int,
                  wall_time_s: float, result: dict[str, Any] | None) -> None:
        if env_steps == self.curve.last_steps:
            return  # the final evaluation of a budget that ended on an eval_every point
        if result is None:
            result = self.evaluate(actor, self.episodes)
        self.curve.add(EvalPoint(env_steps, updates, wall_time_s), result,
                       lambda: self.saved_policy(actor))
