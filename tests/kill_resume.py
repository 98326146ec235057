"""The kill-and-resume check the checkpoint tests share: train a config whole, train it again
killed at one update, resume the killed run, and compare."""
from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hpcrl.placement.serial_run import Trainer, resume_config
from hpcrl.runtime.run_dir import RunDir

# progress columns that differ between any two runs (wall-clock), left out of comparisons
TIME_COLUMNS = {"wall_time_s", "fps", "time_collect_s", "time_compute_s", "time_wait_s",
                "time_communicate_s"}


class Killed(Exception):
    """What the patched placement raises where the run 'dies'."""


def rows(run_dir: Path) -> list[dict[str, str]]:
    """``progress.csv`` of ``run_dir`` without its wall-clock columns."""
    with open(run_dir / "progress.csv") as f:
        return [{k: v for k, v in r.items() if k not in TIME_COLUMNS} for r in csv.DictReader(f)]


def whole_then_killed_and_resumed(config: Any, tmp_path: Path, monkeypatch: Any,
                                  die_at: int,
                                  after_kill: Callable[[Path], None] | None = None
                                  ) -> tuple[Path, Path]:
    """Train ``config`` in ``tmp_path/whole``; train it in ``tmp_path/cut`` with its
    learner raising :class:`Killed` as update ``die_at`` begins (the run's updates counted
    from 0), call ``after_kill(cut)``, then resume the cut run to the end. Returns both run
    paths."""
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    Trainer(config, RunDir(whole), console=None).train()
    trainer = Trainer(config, RunDir(cut), console=None)
    learner = type(trainer.learner)
    original = learner.learn_update

    def dies(self: Any) -> Any:
        if self.leader.updates == die_at:
            raise Killed()
        return original(self)

    monkeypatch.setattr(learner, "learn_update", dies)
    with pytest.raises(Killed):
        trainer.train()
    monkeypatch.setattr(learner, "learn_update", original)
    if after_kill is not None:
        after_kill(cut)
    run = RunDir(cut)
    Trainer(resume_config(run, []), run, resume=True, console=None).train()
    return whole, cut
