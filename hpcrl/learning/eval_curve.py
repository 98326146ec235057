"""The record of evaluations during training: ``eval.csv`` and ``checkpoints/best.pt``.

Whatever plays the evaluation episodes (rank 0's evaluation thread,
:mod:`~hpcrl.learning.periodic_eval`, or, later, evaluator ranks of their own), one writer
keeps the record: :class:`EvalCurve` appends a row per evaluation and replaces ``best.pt``
(the saved policy, the counters it was taken at and its result) with one better than every
earlier one, which ``hpcrl eval --best`` and ``hpcrl.load_policy(..., best=True)`` read. It
takes a result and a way to make the policy's record, not the policy: a record made
elsewhere (an evaluator rank's weights) is as good as one made here.

On resume the rows after the checkpoint are cut off, as in ``progress.csv``, and the best
return so far is read back from the rows kept.
"""
from __future__ import annotations

import csv
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from hpcrl.learning.evaluation import truncation_note
from hpcrl.runtime.finite import save_finite_checkpoint
from hpcrl.runtime.progress import rewrite_rows, truncate_rows
from hpcrl.runtime.run_dir import RunDir, writing

# ``truncated``: the episodes of the row cut at train.eval_max_episode_steps
COLUMNS: tuple[str, ...] = ("env_steps", "updates", "wall_time_s", "mean_return",
                             "std_return", "episodes", "truncated")
#: what an evaluation's result holds (:func:`hpcrl.learning.evaluation.evaluate`'s keys)
RESULT_KEYS: tuple[str, ...] = ("mean_return", "std_return", "episodes", "truncated")


@dataclass(frozen=True)
class EvalPoint:
    """The run's counters at the weights an evaluation played: where its row sits."""

    env_steps: int
    updates: int
    wall_time_s: float


def kept_rows(path: Path, env_steps: int) -> list[dict[str, str]]:
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


class EvalCurve:
    """``eval.csv`` and ``best.pt`` of a run: one row per evaluation, the best one kept."""

    def __init__(self, run: RunDir, env_steps: int, resumed: bool,
                 console: IO[str] | None) -> None:
        """Start the curve of ``run`` (cut back to ``env_steps`` when ``resumed``, else
        written anew with its header)."""
        self.run, self.console = run, console
        with writing("evaluation curve", run.eval_curve_path):
            rows = kept_rows(run.eval_curve_path, env_steps) if resumed else []
            if not rows:
                with open(run.eval_curve_path, "w", newline="") as f:
                    csv.DictWriter(f, COLUMNS).writeheader()
        self.best = max((float(r["mean_return"]) for r in rows), default=-math.inf)
        self.last_steps = int(float(rows[-1]["env_steps"])) if rows else -1

    def add(self, point: EvalPoint, result: dict[str, Any],
            policy: Callable[[], dict[str, Any]]) -> None:
        """Append the row of ``result`` (an evaluation of the weights at ``point``); when it
        is the best so far, ``best.pt`` gets ``policy()`` (the evaluated weights' saved
        record, made only then). A second row at the same env steps is not written (the
        final evaluation of a budget that ended on an evaluation point)."""
        if point.env_steps == self.last_steps:
            return
        row = {"env_steps": point.env_steps, "updates": point.updates,
               "wall_time_s": f"{point.wall_time_s:.6g}",
               "mean_return": f"{result['mean_return']:.6g}",
               "std_return": f"{result['std_return']:.6g}", "episodes": result["episodes"],
               "truncated": result["truncated"]}
        with writing("evaluation curve", self.run.eval_curve_path):
            with open(self.run.eval_curve_path, "a", newline="") as f:
                csv.DictWriter(f, COLUMNS).writerow(row)
        self.last_steps = point.env_steps
        if result["mean_return"] > self.best:
            self.best = result["mean_return"]
            save_finite_checkpoint({
                "policy": policy(),
                "counters": {"updates": point.updates, "env_steps": point.env_steps,
                             "wall_time_s": point.wall_time_s},
                "evaluation": {k: result[k] for k in RESULT_KEYS},
            }, self.run.best_path)
        if self.console is not None:
            print(f"eval at {point.env_steps:,} env steps: mean return "
                  f"{result['mean_return']:.1f} +- {result['std_return']:.1f} "
                  f"(best {self.best:.1f})"
                  f"{truncation_note(result, 'train.eval_max_episode_steps')}",
                  file=self.console, flush=True)
