"""Rank 0's bookkeeping: counters, progress rows, checkpoints, the stop decision, eval.

The leader turns the per-update reports of the gradient workers into one row of
``progress.csv`` and writes checkpoints with the state of every role it collected.
"""
from __future__ import annotations

import functools
import json
import time
from pathlib import Path
from typing import IO, Any, Callable, Optional, TypeVar

from hpcrl.build import policy_record
from hpcrl.comm import report_and_abort
from hpcrl.config.loader import dump_yaml
from hpcrl.core.actor import ActorCritic
from hpcrl.errors import ExplainedError
from hpcrl.evaluation import evaluate
from hpcrl.placement.mpi.job import MpiJob
from hpcrl.placement.mpi.protocol import CHECKPOINT, PREEMPTED, STOP, ReportLayout
from hpcrl.runtime.finite import save_finite_checkpoint
from hpcrl.runtime.metrics import EpisodeWindow, progress_row
from hpcrl.runtime.progress import ConsoleProgress, ProgressLog, columns_for
from hpcrl.runtime.rng import rng_state
from hpcrl.runtime.signals import STOP_REQUEST
from hpcrl.runtime.run_dir import RunDir, write_run_file

Method = TypeVar("Method", bound=Callable[..., Any])


def _ends_the_job(method: Method) -> Method:
    """A failure of the leader that explains itself (a run file that cannot be written, a
    checkpoint refused) aborts every rank with its message; left to propagate, the CLI would
    report it on rank 0 alone and the other ranks would wait for rank 0 forever."""
    @functools.wraps(method)
    def guarded(self: "Leader", *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except ExplainedError as err:
            report_and_abort(self.job.world, self.job.describe, err, err.__traceback__)
    return guarded  # type: ignore[return-value]


SCHEME_KEYS = ("policy_lag", "dropped_rollouts", "time_collect_s", "time_wait_s", "time_compute_s",
               "time_communicate_s")


class Leader:
    """Counters and records of the job; lives on rank 0 only."""

    @_ends_the_job
    def __init__(self, job: MpiJob, run: RunDir, stat_names: tuple[str, ...],
                 resume_state: Optional[dict[str, Any]], console: Optional[IO[str]]) -> None:
        cfg = job.config
        self.job, self.run = job, run
        self.layout = ReportLayout(stat_names)
        self.updates, self.env_steps, self.wall_before = 0, 0, 0.0
        self.episodes = EpisodeWindow()
        if resume_state is not None:
            c = resume_state["counters"]
            self.updates, self.env_steps = int(c["updates"]), int(c["env_steps"])
            self.wall_before = float(c["wall_time_s"])
            self.episodes.load(resume_state["episodes"])
        write_run_file("run config", run.config_path, dump_yaml(cfg))
        self.log = ProgressLog(run.path, columns_for(stat_names), self.updates
                               if resume_state is not None else None, cfg.train.tensorboard)
        self.console = (ConsoleProgress(cfg.train.total_env_steps, cfg.train.log_interval_s,
                                        console) if console is not None else None)
        self.started = time.perf_counter()
        self.start_steps = self.env_steps

    @property
    def wall_time_s(self) -> float:
        return self.wall_before + time.perf_counter() - self.started

    @property
    def done(self) -> bool:
        return self.env_steps >= self.job.config.train.total_env_steps

    @property
    def preempted(self) -> bool:
        """A stop signal arrived before the budget was spent."""
        return STOP_REQUEST.requested and not self.done

    def control(self) -> int:
        """The command after an update: go on, or checkpoint and/or stop (and why)."""
        if self.preempted:
            return STOP | CHECKPOINT | PREEMPTED
        command = STOP if self.done else 0
        return command | (CHECKPOINT if self.checkpoint_due() else 0)

    @_ends_the_job
    def record(self, reports: Any, gradient_asynchrony: float = 0.0) -> None:
        """Add one update made of the reports' rows (one per gradient worker)."""
        figures = self.layout.combine(reports)
        self.updates += 1
        self.env_steps += int(figures["env_steps"])
        self.episodes.add(figures["episodes"], figures["return_sum"], figures["length_sum"])
        elapsed = time.perf_counter() - self.started
        fps = (self.env_steps - self.start_steps) / max(elapsed, 1e-9)
        stats = {name: figures[name] for name in self.layout.stat_names}
        stats.update(grad_norm=figures["grad_norm"], learning_rate=figures["learning_rate"],
                     skipped_updates=figures["skipped_updates"])
        scheme = {key: figures[key] for key in SCHEME_KEYS}
        scheme["gradient_asynchrony"] = gradient_asynchrony
        row = progress_row(self.env_steps, self.updates, self.wall_time_s, fps, self.episodes,
                           int(figures["episodes"]), stats, scheme)
        self.log.write(row)
        if self.console is not None:
            self.console.show(row, final=self.done)

    def checkpoint_due(self) -> bool:
        every = self.job.config.train.checkpoint_every
        return self.done or self.updates % every == 0

    @_ends_the_job
    def write_checkpoint(self, actor: ActorCritic, learner_state: dict[str, Any],
                         collector_states: list[dict[str, Any]]) -> Path:
        """Write the job's state (refused, the previous checkpoint kept, when its weights or
        statistics are not all finite: the job then stops with that message)."""
        self.log.sync()
        collector_states = sorted(collector_states, key=lambda s: s["env_offset"])
        return save_finite_checkpoint({
            "counters": {"updates": self.updates, "env_steps": self.env_steps,
                         "wall_time_s": self.wall_time_s},
            "policy": policy_record(self.job.config, self.job.spaces,
                                    _cpu_copy(actor, self.job)),
            "placement": {"updater": learner_state, "collectors": collector_states},
            "episodes": self.episodes.state(),
            "rng": rng_state(),
            "world_size": self.job.world.Get_size(),
        }, self.run.checkpoint_path)

    @_ends_the_job
    def finish(self, actor: ActorCritic) -> Optional[dict[str, Any]]:
        self.log.close()
        episodes = self.job.config.train.eval_episodes
        if episodes <= 0 or self.preempted:
            return None
        result = evaluate(_cpu_copy(actor, self.job), self.job.config, episodes)
        write_run_file("evaluation result", self.run.eval_path,
                       json.dumps(result, indent=2) + "\n")
        if self.console is not None:
            print(f"eval over {episodes} episodes: mean return {result['mean_return']:.1f} "
                  f"+- {result['std_return']:.1f}", file=self.console.stream, flush=True)
        return result


def _cpu_copy(actor: ActorCritic, job: MpiJob) -> ActorCritic:
    if next(actor.parameters()).device.type == "cpu":
        return actor
    copy = job.new_actor()
    copy.load_state_dict({k: v.cpu() for k, v in actor.state_dict().items()})
    return copy

