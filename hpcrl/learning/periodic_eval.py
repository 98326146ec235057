"""Evaluation during training (``train.eval_every``): ``eval.csv`` and ``checkpoints/best.pt``.

Every ``eval_every`` env steps the writer hands a copy of the policy (on the CPU) to a
thread that plays ``train.eval_episodes`` deterministic episodes, the same ones as the final
evaluation, while training goes on: in an MPI job the other ranks never wait for it. Each
evaluation appends a row to ``eval.csv``; one better than every earlier one replaces
``checkpoints/best.pt`` (the saved policy, the counters it was taken at and its result),
which ``hpcrl eval --best`` and ``hpcrl.load_policy(..., best=True)`` read.

Snapshots are evaluated in order, none dropped, so ``eval.csv`` has one row per due point
whatever the speed of either side; the run waits for the last ones before it ends. On
resume the rows after the checkpoint are cut off, as in ``progress.csv``, and the best
return so far is read back from the rows kept.
"""
from __future__ import annotations

import copy
import csv
import math
import queue
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from torch import nn

from hpcrl.learning.evaluation import truncation_note
from hpcrl.runtime.finite import save_finite_checkpoint
from hpcrl.runtime.progress import rewrite_rows, truncate_rows
from hpcrl.runtime.run_dir import RunDir, writing
from hpcrl.sections.schema import TrainConfig

# ``truncated``: the episodes of the row cut at train.eval_max_episode_steps
COLUMNS: tuple[str, ...] = ("env_steps", "updates", "wall_time_s", "mean_return",
                             "std_return", "episodes", "truncated")
LAG_WARNING = 3  # snapshots waiting before the run says the evaluations fall behind


def _kept_rows(path: Path, env_steps: int) -> list[dict[str, str]]:
    """The rows of ``eval.csv`` up to ``env_steps``; the file is cut to them (and written
    anew under today's :data:`COLUMNS` when an earlier hpcrl wrote it with fewer)."""
    if not path.exists():
        return []
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    kept = [r for r in rows if int(float(r["env_steps"])) <= env_steps]
    if tuple(reader.fieldnames or ()) == COLUMNS:
        truncate_rows(path, len(kept))
    else:
        rewrite_rows(path, COLUMNS, kept)
    return kept


#: ``evaluate(actor, episodes)``: the run's evaluation (:func:`hpcrl.learning.evaluation.evaluate`
#: over its env), what the evaluator calls on each snapshot
Evaluation = Callable[[nn.Module, int], dict[str, Any]]

class PeriodicEvaluator:
    """Evaluates snapshots of the policy in a thread, writing ``eval.csv`` and ``best.pt``."""

    def __init__(self, train: TrainConfig, evaluate: Evaluation, run: RunDir, env_steps: int,
                 resumed: bool, saved_policy: Callable[[nn.Module], dict[str, Any]],
                 console: IO[str] | None) -> None:
        """Evaluate every ``train.eval_every`` env steps for ``train.eval_episodes``
        episodes with ``evaluate`` (the run's :func:`hpcrl.learning.evaluation.evaluate`), appending
        to ``eval.csv`` (cut back to ``env_steps`` when ``resumed``)."""
        self.run, self.console, self.evaluate = run, console, evaluate
        self.every, self.episodes = train.eval_every, train.eval_episodes
        self.saved_policy = saved_policy
        self.next_at = (env_steps // self.every + 1) * self.every
        with writing("evaluation curve", run.eval_curve_path):
            rows = _kept_rows(run.eval_curve_path, env_steps) if resumed else []
            if not rows:
                with open(run.eval_curve_path, "w", newline="") as f:
                    csv.DictWriter(f, COLUMNS).writeheader()
        self.best = max((float(r["mean_return"]) for r in rows), default=-math.inf)
        self.last_steps = int(float(rows[-1]["env_steps"])) if rows else -1
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
        self.next_at = (env_steps // self.every + 1) * self.every
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
        if env_steps == self.last_steps:
            return  # the final evaluation of a budget that ended on an eval_every point
        if result is None:
            result = self.evaluate(actor, self.episodes)
        row = {"env_steps": env_steps, "updates": updates,
               "wall_time_s": f"{wall_time_s:.6g}", "mean_return": f"{result['mean_return']:.6g}",
               "std_return": f"{result['std_return']:.6g}", "episodes": self.episodes,
               "truncated": result["truncated"]}
        with writing("evaluation curve", self.run.eval_curve_path):
            with open(self.run.eval_curve_path, "a", newline="") as f:
                csv.DictWriter(f, COLUMNS).writerow(row)
        self.last_steps = env_steps
        if result["mean_return"] > self.best:
            self.best = result["mean_return"]
            save_finite_checkpoint({
                "policy": self.saved_policy(actor),
                "counters": {"updates": updates, "env_steps": env_steps,
                             "wall_time_s": wall_time_s},
                "evaluation": {k: result[k] for k in ("mean_return", "std_return",
                                                      "episodes", "truncated")},
            }, self.run.best_path)
        if self.console is not None:
            print(f"eval at {env_steps:,} env steps: mean return {result['mean_return']:.1f} "
                  f"+- {result['std_return']:.1f} (best {self.best:.1f})"
                  f"{truncation_note(result, 'train.eval_max_episode_steps')}",
                  file=self.console, flush=True)
