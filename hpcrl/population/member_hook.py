"""A population member inside its run: :class:`MemberHook`, the run writer's interval hook.

At the end of each ``pbt.interval_env_steps`` the run's writer checkpoints and hands the
checkpoint here (:class:`~hpcrl.learning.run_writer.IntervalHook`). The hook publishes a copy
of it under the member's own place in ``population/`` (named by its env steps, so a peer's
copy always matches the score it read), scores the member, and asks
:meth:`~hpcrl.population.member.Member.step`. When the member copies a leader, the hook keeps
the decision and asks the writer to end the run's roles; the member's driver
(:mod:`~hpcrl.population.member_run`) then goes on from the leader's state with the new
values, in the same process.

The score is ``pbt.objective``: ``mean_return`` is the newest evaluation's mean return
(``eval.csv``, when the run evaluates during training: ``train.eval_every``), else the mean
return of the training episodes of the last progress row; any other name is a column of the
last progress row (``episode_length_mean``, a loss term).
"""
from __future__ import annotations

import csv
import math
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hpcrl.errors import ConfigError
from hpcrl.population.member import Decision, Member
from hpcrl.population.workspace import write_atomic

__all__ = ["PUBLISHED_KEPT", "MemberHook", "score_of"]

# how many published checkpoints a member keeps in its place: the newest, and the one
# before it for a peer that read the older snapshot just before it was replaced
PUBLISHED_KEPT = 2
TRAINING_RETURN = "episode_return_mean"


def score_of(objective: str, row: Mapping[str, Any], eval_csv: Path) -> float:
    """The member's score under ``objective`` (see the module); NaN while there is none yet
    (no finished episode): it then ranks below every number."""
    if objective == "mean_return":
        newest = _newest_eval(eval_csv)
        if newest is not None:
            return newest
        objective = TRAINING_RETURN
    if objective not in row:
        raise ConfigError(f"pbt.objective is {objective!r}, which the run does not report: "
                          f"use mean_return or a progress.csv column ({', '.join(sorted(row))})")
    value = row[objective]
    return float(value) if value is not None and value != "" else math.nan


def _newest_eval(eval_csv: Path) -> float | None:
    """The mean return of the newest row of ``eval.csv`` (None: no evaluation yet)."""
    try:
        with open(eval_csv, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError:
        return None
    for row in reversed(rows):
        try:
            return float(row["mean_return"])
        except (KeyError, TypeError, ValueError):
            continue
    return None


class MemberHook:
    """The run writer's interval hook of one member (``hyperparameters``: the values the
    run trains with, the keys of ``pbt.mutate``). After a copy, :attr:`decision` holds it."""

    def __init__(self, member: Member, hyperparameters: Mapping[str, float], run_path: Path
                 ) -> None:
        self.member, self.run_path = member, run_path
        self.hyperparameters = dict(hyperparameters)
        self.decision: Decision | None = None

    def due(self, env_steps: int) -> bool:
        """Whether the member's interval ended at ``env_steps``."""
        return self.member.due(env_steps)

    def state(self, env_steps: int) -> dict[str, Any] | None:
        """Nothing: a member's comparisons start again from the exchange's files."""
        return None

    def after_checkpoint(self, checkpoint: Path, env_steps: int, row: Mapping[str, Any],
                         final: bool) -> bool:
        """Publish the interval's checkpoint and score; True when the member copies a
        leader (then :attr:`decision` says whom, from which copy, with which values). The
        budget's last checkpoint is published, never followed by a copy."""
        score = score_of(self.member.settings.objective, row, self.run_path / "eval.csv")
        published = self.publish(checkpoint, env_steps)
        if final:
            self.member.publish(env_steps, score, self.hyperparameters, published)
            return False
        decision = self.member.step(env_steps, score, self.hyperparameters, published)
        if decision.stay:
            return False
        self.decision = decision
        return True

    def publish(self, checkpoint: Path, env_steps: int) -> Path:
        """Copy ``checkpoint`` atomically to the member's place as ``at_<env_steps>.pt`` and
        prune the older ones past :data:`PUBLISHED_KEPT`; the copy's path."""
        place = self.member.workspace.member_dir(self.member.member)
        target = place / f"at_{env_steps:012d}{checkpoint.suffix}"
        with open(checkpoint, "rb") as src:
            write_atomic(target, lambda f: shutil.copyfileobj(src, f))
        for old in sorted(place.glob(f"at_*{checkpoint.suffix}"))[:-PUBLISHED_KEPT]:
            old.unlink(missing_ok=True)
        return target
