"""A run in this process alone: the job of one rank, and what resuming it may change.

:class:`Trainer` is a serial run as the Python API and the command line start it: the job of
:mod:`hpcrl.placement.job_run` over a communicator of one process, which runs the same roles,
leader and learner loop as every rank of an MPI job, with the in-process forms of the
exchanges. Checkpoints are taken at update boundaries with the state of every role, so a
resumed run continues exactly where the checkpoint was taken. A non-finite value (in env
data, a loss, a gradient, or a state to checkpoint) stops the run with a
:class:`~hpcrl.errors.NonFiniteError` naming where it came from and the last good
checkpoint, which is never overwritten.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import IO, Any

from torch import nn

from hpcrl.comm.world import SelfComm
from hpcrl.config.loader import ConfigError, from_dict, read_yaml
from hpcrl.learning.run_writer import RunWriter
from hpcrl.placement.job_run import JobRun, prepare
from hpcrl.runtime.checkpoint import CheckpointError
from hpcrl.runtime.metrics import EpisodeWindow
from hpcrl.runtime.run_dir import RunDir
from hpcrl.sections.schema import Config

RESUMABLE_SECTIONS = ("train",)


def resume_config(run: RunDir, overrides: list[str]) -> Config:
    """The config of the run being resumed, with overrides limited to ``train.*`` keys."""
    if not run.config_path.is_file():
        raise CheckpointError(f"cannot resume: '{run.path}' has no config.yaml; is it an hpcrl "
                              f"run directory?")
    for pair in overrides:
        key = pair.split("=", 1)[0].strip()
        if key.split(".", 1)[0] not in RESUMABLE_SECTIONS:
            raise ConfigError(f"config key '{key}' cannot change on resume: the checkpoint's "
                              f"weights and optimiser were built for its value (only train.* "
                              f"keys may change)")
    return from_dict(read_yaml(run.config_path), overrides, saved=True)


class Trainer:
    """Trains ``config`` in ``run`` in this process alone (``resume``: from its checkpoint),
    recording as it goes: the job of one rank, prepared here and run by :meth:`train`."""

    def __init__(self, config: Config, run: RunDir, resume: bool = False,
                 console: IO[str] | None = sys.stderr) -> None:
        self.config, self.run = config, run
        self.job_run: JobRun = prepare(config, run.path, resume, console, world=SelfComm())
        self.preempted = False
        self.env_failed = False  # it stopped (checkpointed) for an env that failed for good

    @property
    def learner(self) -> Any:
        """The run's learner (its one rank's role): its algorithm, rollout source or
        replay, collector."""
        return self.job_run.ranked

    @property
    def actor(self) -> nn.Module:
        """The one policy of the run: what acts, learns and checkpoints save."""
        actor: nn.Module = self.learner.actor
        return actor

    @property
    def writer(self) -> RunWriter:
        """The run's records (progress rows, checkpoints, evaluation)."""
        writer: RunWriter = self.job_run.leader.writer
        return writer

    @property
    def episodes(self) -> EpisodeWindow:
        """The window of finished episodes behind the mean return of the rows."""
        return self.writer.episodes

    def train(self) -> dict[str, float] | None:
        """Train to the budget, checkpoint at the end, then evaluate; returns the evaluation
        (None when a stop signal ended the run after a checkpoint, or none was asked for).
        A run resumed with its budget spent trains nothing more and is evaluated."""
        job_run = self.job_run
        if self.writer.done:
            job_run.finish_spent()
        else:
            job_run.train()
        self.preempted, self.env_failed = job_run.preempted, job_run.env_failed
        return job_run.evaluation


def train(config: Config, run_dir: str | Path, resume: bool = False,
          console: IO[str] | None = sys.stderr) -> dict[str, float] | None:
    """Train ``config`` in ``run_dir`` (resuming from its checkpoint when asked)."""
    return Trainer(config, RunDir(Path(run_dir)), resume, console).train()
