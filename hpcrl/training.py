"""The training loop of a run: updates, progress rows, checkpoints, resume, final eval.

The loop is placement-agnostic: it asks a placement for one update at a time and records
what came back. Checkpoints are taken at update boundaries with the state of every role,
so a resumed run continues exactly where the checkpoint was taken. A non-finite value (in
env data, a loss, a gradient, or a state to checkpoint) stops the loop with a
:class:`~hpcrl.errors.NonFiniteError` naming where it came from and the last good
checkpoint, which is never overwritten.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import IO, Any

from hpcrl.build import env_spaces
from hpcrl.config.loader import ConfigError, from_dict, read_yaml
from hpcrl.config.schema import Config
from hpcrl.learning.loop import RecorderControl, run_learner
from hpcrl.learning.recorder import RunRecorder
from hpcrl.placement import make_placement
from hpcrl.roles.protocol import CHECKPOINT, Control, Report
from hpcrl.runtime.checkpoint import CheckpointError, load_checkpoint
from hpcrl.runtime.cpu import set_compute_threads, startup_objects_frozen
from hpcrl.runtime.finite import naming_last_good
from hpcrl.runtime.metrics import EpisodeWindow
from hpcrl.runtime.rng import seed_everything, set_rng_state
from hpcrl.runtime.run_dir import RunDir
from hpcrl.runtime.signals import STOP_REQUEST

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
    """Runs updates on a placement until ``train.total_env_steps``, recording as it goes."""

    def __init__(self, config: Config, run: RunDir, resume: bool = False,
                 console: IO[str] | None = sys.stderr) -> None:
        self.config, self.run = config, run
        set_compute_threads(config.train.torch_threads)
        seed_everything(config.seed)
        self.spaces = env_spaces(config)
        self.placement = make_placement(config, self.spaces)
        self.inexact_envs: list[str] = []
        self.preempted = False
        state = self._restore() if resume else None
        self.recorder = RunRecorder(config, self.spaces, run, self.placement.stat_names,
                                    state, console)

    @property
    def episodes(self) -> EpisodeWindow:
        """The window of finished episodes behind the mean return of the rows."""
        return self.recorder.episodes

    # -- checkpoints -------------------------------------------------------------------------
    def _restore(self) -> dict[str, Any]:
        state = load_checkpoint(self.run.checkpoint_path)
        self.inexact_envs = self.placement.load_state_dict(state["placement"],
                                                           state["policy"]["state_dict"])
        set_rng_state(state["rng"])
        if self.inexact_envs:
            print(f"hpcrl: resumed envs were reset: their state could not be saved "
                  f"({', '.join(self.inexact_envs)})", file=sys.stderr)
        return state

    def checkpoint(self) -> Path:
        """Write the full state of the run, atomically, and return its path (refused, and the
        previous checkpoint kept, when its weights or statistics are not all finite)."""
        return self.recorder.checkpoint(self.placement.master_actor,
                                        self.placement.state_dict())

    # -- the loop ----------------------------------------------------------------------------
    def train(self) -> dict[str, float] | None:
        """Train to the budget, checkpoint at the end, then evaluate; returns the eval figures."""
        restore_signals = STOP_REQUEST.install()
        rec = self.recorder
        try:
            with naming_last_good(self.run.checkpoint_path,
                                  lambda: f"after {rec.updates} updates "
                                          f"({rec.env_steps} env steps)"), \
                    startup_objects_frozen():
                self._loop()
        finally:
            restore_signals()
            rec.close()
            self.placement.close()
        return None if self.preempted else self.final_eval()

    def _loop(self) -> None:
        """Updates until the budget is spent or a stop signal came (checkpointing then): the
        learner loop every placement runs, deciding with this run's recorder."""
        if self.recorder.done:  # resumed with its budget spent: no update is left to learn
            return
        placement = self.placement
        run_learner(self, RecorderControl(self.recorder, placement.layout,
                                          placement.master_actor))

    # -- the learner the loop drives (hpcrl.learning.loop.Learner) -------------------------
    def start(self) -> None:
        """Nothing to publish: the placement's collector holds the weights already."""

    def learn_update(self) -> Report:
        """One update of the placement; returns its report."""
        rec = self.recorder
        return self.placement.run_update(rec.updates, rec.env_steps)

    def end_update(self, control: Control) -> None:
        """Write the checkpoint when the recorder asks for one."""
        if control.command & CHECKPOINT:
            self.checkpoint()

    def finish(self) -> None:
        """Nothing to close here: :meth:`train` closes the recorder and the placement."""

    def final_eval(self) -> dict[str, float] | None:
        """Evaluate the trained policy for ``train.eval_episodes`` episodes (none: None) and
        write ``eval.json``."""
        return self.recorder.final_eval(self.placement.master_actor)


def train(config: Config, run_dir: str | Path, resume: bool = False,
          console: IO[str] | None = sys.stderr) -> dict[str, float] | None:
    """Train ``config`` in ``run_dir`` (resuming from its checkpoint when asked)."""
    return Trainer(config, RunDir(Path(run_dir)), resume, console).train()
