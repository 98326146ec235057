"""The training loop of a run: updates, progress rows, checkpoints, resume, final eval.

The loop is placement-agnostic: it asks a placement for one update at a time and records
what came back. Checkpoints are taken at update boundaries with the state of every role,
so a resumed run continues exactly where the checkpoint was taken. A non-finite value (in
env data, a loss, a gradient, or a state to checkpoint) stops the loop with a
:class:`~hpcrl.runtime.finite.NonFiniteError` naming where it came from and the last good
checkpoint, which is never overwritten.
"""
from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Optional

import torch

from hpcrl.build import env_spaces, policy_record
from hpcrl.config.loader import ConfigError, dump_yaml, from_dict, read_yaml
from hpcrl.config.schema import Config
from hpcrl.evaluation import evaluate
from hpcrl.placement import make_placement
from hpcrl.placement.serial import UpdateResult
from hpcrl.runtime.checkpoint import CheckpointError, load_checkpoint
from hpcrl.runtime.finite import naming_last_good, save_finite_checkpoint
from hpcrl.runtime.metrics import EpisodeWindow, progress_row
from hpcrl.runtime.progress import ConsoleProgress, ProgressLog, columns_for
from hpcrl.runtime.rng import rng_state, seed_everything, set_rng_state
from hpcrl.runtime.run_dir import RunDir, write_run_file
from hpcrl.runtime.signals import STOP_REQUEST

RESUMABLE_SECTIONS = ("train",)


@dataclass
class Counters:
    updates: int = 0
    env_steps: int = 0
    wall_time_s: float = 0.0


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
    return from_dict(read_yaml(run.config_path), overrides)


class Trainer:
    """Runs updates on a placement until ``train.total_env_steps``, recording as it goes."""

    def __init__(self, config: Config, run: RunDir, resume: bool = False,
                 console: Optional[IO[str]] = sys.stderr) -> None:
        self.config, self.run = config, run
        if config.train.torch_threads:
            torch.set_num_threads(config.train.torch_threads)
        seed_everything(config.seed)
        self.spaces = env_spaces(config)
        self.placement = make_placement(config, self.spaces)
        self.counters = Counters()
        self.episodes = EpisodeWindow()
        self.inexact_envs: list[str] = []
        self.preempted = False
        resume_rows = self._restore() if resume else None
        write_run_file("run config", run.config_path, dump_yaml(config))
        self.log = ProgressLog(run.path, columns_for(self.placement.stat_names),
                               resume_rows, config.train.tensorboard)
        self.console = (ConsoleProgress(config.train.total_env_steps,
                                        config.train.log_interval_s, console)
                        if console is not None else None)

    # -- checkpoints -------------------------------------------------------------------------
    def _restore(self) -> int:
        state = load_checkpoint(self.run.checkpoint_path)
        c = state["counters"]
        self.counters = Counters(int(c["updates"]), int(c["env_steps"]), float(c["wall_time_s"]))
        self.inexact_envs = self.placement.load_state_dict(state["placement"],
                                                           state["policy"]["state_dict"])
        self.episodes.load(state["episodes"])
        set_rng_state(state["rng"])
        if self.inexact_envs:
            print(f"hpcrl: resumed envs were reset: their state could not be saved "
                  f"({', '.join(self.inexact_envs)})", file=sys.stderr)
        return self.counters.updates

    def checkpoint(self) -> Path:
        """Write the full state of the run, atomically, and return its path (refused, and the
        previous checkpoint kept, when its weights or statistics are not all finite)."""
        self.log.sync()
        c = self.counters
        return save_finite_checkpoint({
            "counters": {"updates": c.updates, "env_steps": c.env_steps,
                         "wall_time_s": c.wall_time_s},
            "policy": policy_record(self.config, self.spaces, self.placement.master_actor),
            "placement": self.placement.state_dict(),
            "episodes": self.episodes.state(),
            "rng": rng_state(),
        }, self.run.checkpoint_path)

    # -- the loop ----------------------------------------------------------------------------
    def _row(self, result: UpdateResult, fps: float) -> dict[str, Any]:
        c = self.counters
        scheme = {"policy_lag": result.policy_lag,
                  "gradient_asynchrony": result.gradient_asynchrony, **result.times}
        return progress_row(c.env_steps, c.updates, c.wall_time_s, fps, self.episodes,
                            len(result.episode_returns), result.stats, scheme)

    def train(self) -> Optional[dict[str, float]]:
        """Train to the budget, checkpoint at the end, then evaluate; returns the eval figures."""
        start_steps, start_wall = self.counters.env_steps, self.counters.wall_time_s
        t_start = time.perf_counter()
        restore_signals = STOP_REQUEST.install()
        try:
            with naming_last_good(self.run.checkpoint_path,
                                  lambda: f"after {self.counters.updates} updates "
                                          f"({self.counters.env_steps} env steps)"):
                self._loop(start_steps, start_wall, t_start)
        finally:
            restore_signals()
            self.log.close()
            self.placement.close()
        return None if self.preempted else self.final_eval()

    def _loop(self, start_steps: int, start_wall: float, t_start: float) -> None:
        """Updates until the budget is spent or a stop signal came (checkpointing then)."""
        cfg = self.config.train
        every = cfg.checkpoint_every
        while self.counters.env_steps < cfg.total_env_steps:
            result = self.placement.run_update(self.counters.updates,
                                               self.counters.env_steps)
            self.counters.updates += 1
            self.counters.env_steps += result.env_steps
            elapsed = time.perf_counter() - t_start
            self.counters.wall_time_s = start_wall + elapsed
            self.episodes.add(len(result.episode_returns),
                              float(result.episode_returns.sum()),
                              float(result.episode_lengths.sum()))
            row = self._row(result, (self.counters.env_steps - start_steps) / max(elapsed, 1e-9))
            self.log.write(row)
            done = self.counters.env_steps >= cfg.total_env_steps
            if self.console is not None:
                self.console.show(row, final=done)
            if STOP_REQUEST.requested and not done:
                self.checkpoint()  # the scheduler wants the job gone: save, then stop
                self.preempted = True
                break
            if done or self.counters.updates % every == 0:
                self.checkpoint()

    def final_eval(self) -> Optional[dict[str, float]]:
        episodes = self.config.train.eval_episodes
        if episodes <= 0:
            return None
        result = evaluate(self.placement.master_actor, self.config, episodes)
        write_run_file("evaluation result", self.run.eval_path,
                       json.dumps(result, indent=2) + "\n")
        if self.console is not None:
            print(f"eval over {episodes} episodes: mean return {result['mean_return']:.1f} "
                  f"+- {result['std_return']:.1f}", file=self.console.stream, flush=True)
        return result


def train(config: Config, run_dir: str | Path, resume: bool = False,
          console: Optional[IO[str]] = sys.stderr) -> Optional[dict[str, float]]:
    """Train ``config`` in ``run_dir`` (resuming from its checkpoint when asked)."""
    return Trainer(config, RunDir(Path(run_dir)), resume, console).train()

