"""What a run leaves in its directory, the same for every placement.

:class:`RunWriter` writes ``config.yaml``, one ``progress.csv`` row per update (mirrored to
TensorBoard, W&B and the console), the checkpoint dict, the evaluations during training
(:mod:`~hpcrl.learning.periodic_eval`, recorded by :mod:`~hpcrl.learning.eval_curve`) and
the final evaluation. The serial
:class:`~hpcrl.placement.serial_run.Trainer` and the MPI :class:`~hpcrl.placement.leader.Leader`
both record through it, so a column, a checkpoint key or the evaluation line means the same
thing whatever ran the updates.
"""
from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

from torch import nn

from hpcrl.envs.vector import EnvSpaces
from hpcrl.exchange.messages import CHECKPOINT, ENV_FAILED, PREEMPTED, RELOAD, STOP
from hpcrl.learning.eval_curve import EvalCurve
from hpcrl.learning.evaluation import evaluate, success_note, truncation_note
from hpcrl.learning.periodic_eval import PeriodicEvaluator
from hpcrl.runtime.checkpoint import keep_recent
from hpcrl.runtime.finite import save_finite_checkpoint
from hpcrl.runtime.metrics import EpisodeWindow, progress_row
from hpcrl.runtime.progress import ConsoleProgress, ProgressLog, columns_for
from hpcrl.runtime.rng import rng_state
from hpcrl.runtime.run_dir import ENV_FAILED_MARKER, LOST_MARKER, RunDir, write_run_file
from hpcrl.runtime.signals import STOP_REQUEST
from hpcrl.runtime.wandb_log import WandbLog
from hpcrl.sections.schema import EnvConfig, TrainConfig
from hpcrl.trained.saved_policy import saved_policy

#: ``remote(curve, env_steps, saved_policy)``: the evaluations during training played
#: elsewhere than in rank 0's thread (evaluator ranks:
#: :class:`~hpcrl.placement.evaluators.RemoteEvaluations`), recording into ``curve``
RemoteEvaluations = Callable[[EvalCurve, int, Callable[[nn.Module], dict[str, Any]]], Any]


class IntervalHook(Protocol):
    """What a run does at intervals of its own besides the writer's checkpoints: a population
    member's comparison with its peers (:class:`~hpcrl.population.member_hook.MemberHook`).
    The writer checkpoints when :meth:`due`, hands the checkpoint to :meth:`after_checkpoint`,
    and ends the run's roles for a reload when that asks for one."""

    def due(self, env_steps: int) -> bool:
        """Whether an interval ended at ``env_steps`` (the writer then checkpoints)."""
        ...

    def after_checkpoint(self, checkpoint: Path, env_steps: int, row: Mapping[str, Any],
                         final: bool) -> bool:
        """The checkpoint of an interval's end (``final``: the budget's) is written; ``row``
        is the last progress row. True asks the run to end its roles so that it goes on
        from another state (a reload; the writer stops with ``STOP | RELOAD``)."""
        ...

    def state(self, env_steps: int) -> dict[str, Any] | None:
        """What of the hook a checkpoint at ``env_steps`` keeps, as the hook will be once
        the checkpoint is handed to it (None: nothing; a resume gives it back)."""
        ...


@dataclass(frozen=True)
class WrittenConfig:
    """What the writer reads of a run's config: the train section (budget, logs,
    checkpoints, evaluations), and the env and seed its evaluations play. The whole config
    reaches it only as data it writes and never reads (``text`` for ``config.yaml``, ``data``
    for checkpoints and W&B), so the writer depends on two sections, not on every key."""

    train: TrainConfig
    env: EnvConfig
    seed: int
    text: str  # the resolved config as YAML (hpcrl.config.loader.dump_yaml)
    data: dict[str, Any]  # the config as plain dicts (hpcrl.config.loader.to_dict)


class RunWriter:
    """Counters, progress rows, checkpoints and the final evaluation of one run.

    ``resume_state`` (a loaded checkpoint) restores the counters and the episode window and
    cuts ``progress.csv`` back to the checkpoint's rows. ``remote``: where the evaluations
    during training are played when not in rank 0's thread (evaluator ranks). ``interval``:
    checkpoints of a population member's intervals, each handed to it (:class:`IntervalHook`).
    """

    def __init__(self, config: WrittenConfig, spaces: EnvSpaces, run: RunDir,
                 stat_names: tuple[str, ...], resume_state: dict[str, Any] | None,
                 console: IO[str] | None, remote: RemoteEvaluations | None = None,
                 interval: IntervalHook | None = None) -> None:
        self.config, self.spaces, self.run = config, spaces, run
        self.interval = interval  # a population member's comparisons (None: a lone run)
        self.reloading = False  # the interval hook asked to end the roles for a reload
        self.last_row: dict[str, Any] = {}
        self.train = train = config.train  # the keys it reads: budget, logs, checkpoints, evals
        self.trained = False  # an update recorded by this process (RunDir.trained_path)
        self.updates, self.env_steps, self.wall_before = 0, 0, 0.0
        self.episodes = EpisodeWindow()
        if resume_state is not None:
            c = resume_state["counters"]
            self.updates, self.env_steps = int(c["updates"]), int(c["env_steps"])
            self.wall_before = float(c["wall_time_s"])
            self.episodes.load(resume_state["episodes"])
        write_run_file("run config", run.config_path, config.text)
        run.stopped_path.unlink(missing_ok=True)  # going again: no longer a stopped run
        self.log = ProgressLog(run.path, columns_for(stat_names),
                               self.updates if resume_state is not None else None,
                               train.tensorboard)
        self.console = (ConsoleProgress(train.total_env_steps, train.log_interval_s, console)
                        if console is not None else None)
        self.config_dict = config.data  # see saved_policy
        self.wandb = (WandbLog(train.wandb, run, self.config_dict)
                      if train.wandb.project else None)
        self.started = time.perf_counter()
        self.last_checkpoint_at = time.monotonic()  # train.checkpoint_every_s counts from it
        self.start_steps = self.env_steps
        # why the job stops early for lost collectors (scheme.min_collectors), once it does
        self.lost_note: str | None = None
        # why it stops early for an env that failed for good (the rank, env and error)
        self.env_note: str | None = None
        # the evaluations during training: rank 0's thread, or the evaluator ranks' (remote)
        self.periodic: Any = None
        if train.eval_every > 0 and remote is None:
            self.periodic = PeriodicEvaluator(train, self.evaluate, run, self.env_steps,
                                              resume_state is not None, self.saved_policy,
                                              console)
        elif train.eval_every > 0 and remote is not None:
            curve = EvalCurve(run, self.env_steps, resume_state is not None, console)
            self.periodic = remote(curve, self.env_steps, self.saved_policy)

    def evaluate(self, actor: nn.Module, episodes: int, console: IO[str] | None = None
                 ) -> dict[str, Any]:
        """``actor`` evaluated over ``episodes`` deterministic episodes of the run's env
        (:func:`hpcrl.learning.evaluation.evaluate`)."""
        return evaluate(actor, self.config.env, episodes, self.config.seed,
                        self.train.eval_max_episode_steps, console=console)

    def saved_policy(self, actor: nn.Module) -> dict[str, Any]:
        """``actor``'s record for a checkpoint (:func:`hpcrl.trained.saved_policy.saved_policy`)."""
        return saved_policy(self.config_dict, self.spaces, actor)

    @property
    def wall_time_s(self) -> float:
        """Seconds of training of the whole run, resumed parts included."""
        return self.wall_before + time.perf_counter() - self.started

    @property
    def done(self) -> bool:
        """The env-step budget is spent."""
        return self.env_steps >= self.train.total_env_steps

    @property
    def preempted(self) -> bool:
        """A stop signal arrived, too few collectors are live (:attr:`lost_note`), or an
        env failed for good (:attr:`env_note`), before the budget was spent."""
        early = (STOP_REQUEST.requested or self.lost_note is not None
                 or self.env_note is not None)
        return early and not self.done

    @property
    def stop_command(self) -> int:
        """The command bits of a stop before the budget: ``STOP | CHECKPOINT | PREEMPTED``,
        with ``ENV_FAILED`` when an env's failure caused it (every rank then leaves with
        :data:`~hpcrl.runtime.signals.EXIT_ENV_FAILED`)."""
        return STOP | CHECKPOINT | PREEMPTED | (ENV_FAILED if self.env_note is not None else 0)

    def checkpoint_due(self) -> bool:
        """The budget is spent, ``train.checkpoint_every`` updates passed, or
        ``train.checkpoint_every_s`` seconds since the last checkpoint (or the start)."""
        train = self.train
        overdue = (train.checkpoint_every_s > 0
                   and time.monotonic() - self.last_checkpoint_at >= train.checkpoint_every_s)
        interval = self.interval is not None and self.interval.due(self.env_steps)
        return self.done or overdue or interval or self.updates % train.checkpoint_every == 0

    def command(self) -> int:
        """What the run does after the update just recorded, as the command bits every
        placement acts on (the serial loop here, the MPI leader's broadcast to every rank):
        0 goes on; ``CHECKPOINT`` when one is due; ``STOP | CHECKPOINT`` at the end of the
        budget; :attr:`stop_command` when a stop signal came, too few collectors are live
        or an env failed for good; ``STOP | RELOAD`` after the interval hook asked for a
        reload (the update trained since its checkpoint is dropped: the run goes on from
        the state the hook chose)."""
        if self.preempted:
            return self.stop_command
        if self.reloading and not self.done:
            return STOP | RELOAD
        return (STOP if self.done else 0) | (CHECKPOINT if self.checkpoint_due() else 0)

    def add_update(self, env_steps: int, episodes: tuple[float, float, float],
                   stats: Mapping[str, float], scheme: Mapping[str, float]) -> dict[str, Any]:
        """Count one update (``episodes``: finished count, return sum, length sum) and write
        its row; returns the row."""
        self.updates += 1
        self.env_steps += int(env_steps)
        self.episodes.add(*episodes)
        elapsed = time.perf_counter() - self.started
        fps = (self.env_steps - self.start_steps) / max(elapsed, 1e-9)
        row = progress_row(self.env_steps, self.updates, self.wall_time_s, fps, self.episodes,
                           int(episodes[0]), stats, scheme)
        self.log.write(row)
        self.last_row = row
        if not self.trained and env_steps > 0:  # the batch scripts' sign that this step
            # did work (an update that learnt nothing, an env having failed, is none)
            self.trained = True
            write_run_file("first-update marker", self.run.trained_path, f"{self.updates}\n")
        if self.wandb is not None:
            self.wandb.log(row)
        if self.console is not None:
            self.console.show(row, final=self.done)
        return row

    def after_update(self, actor: nn.Module) -> None:
        """Hand a copy of ``actor`` to the evaluations during training when one is due (the
        final evaluation covers the end of the budget)."""
        if self.periodic is not None and self.periodic.due(self.env_steps) and not self.done:
            self.periodic.submit(actor, self.env_steps, self.updates, self.wall_time_s)

    def checkpoint(self, actor: nn.Module, placement_state: dict[str, Any],
                   **extra: Any) -> Path:
        """Write the run's state with ``actor`` as its policy (refused, the previous
        checkpoint kept, when its weights or statistics are not all finite). After a stop
        signal, the checkpoint is followed by the run directory's ``stopped`` marker."""
        self.log.sync()
        path = save_finite_checkpoint({
            "counters": {"updates": self.updates, "env_steps": self.env_steps,
                         "wall_time_s": self.wall_time_s},
            "policy": self.saved_policy(actor),
            "placement": placement_state,
            "episodes": self.episodes.state(),
            "rng": rng_state(),
            **({"interval": self.interval.state(self.env_steps)}
               if self.interval is not None else {}),
            **extra,
        }, self.run.checkpoint_path)
        keep_recent(path, self.env_steps, self.train.keep_checkpoints)
        self.last_checkpoint_at = time.monotonic()
        if (self.interval is not None and not self.preempted
                and (self.done or self.interval.due(self.env_steps))):
            self.reloading = self.interval.after_checkpoint(path, self.env_steps, self.last_row,
                                                            final=self.done)
        if self.preempted:
            if self.env_note is not None:
                name = f"{ENV_FAILED_MARKER} {self.env_note}"
            elif self.lost_note is not None:
                name = f"{LOST_MARKER} {self.lost_note}"
            else:  # preempted with no lost note: a stop signal arrived, so signum is set
                assert STOP_REQUEST.signum is not None
                name = signal.Signals(STOP_REQUEST.signum).name
            write_run_file("stop marker", self.run.stopped_path,
                           f"{name}: checkpointed after {self.updates} updates "
                           f"({self.env_steps} env steps)\n")
        return path

    def final_eval(self, actor: nn.Module) -> dict[str, float] | None:
        """Evaluate ``actor`` for ``train.eval_episodes`` episodes (none: None), write
        ``eval.json`` and say the mean return on the console."""
        episodes = self.train.eval_episodes
        if episodes <= 0:
            return None
        stream = self.console.stream if self.console is not None else None
        result = self.evaluate(actor, episodes, stream)
        write_run_file("evaluation result", self.run.eval_path,
                       json.dumps(result, indent=2) + "\n")
        if stream is not None:
            print(f"eval over {episodes} episodes: mean return {result['mean_return']:.1f} "
                  f"+- {result['std_return']:.1f}{success_note(result)}"
                  f"{truncation_note(result, 'train.eval_max_episode_steps')}",
                  file=stream, flush=True)
        if self.periodic is not None:
            self.periodic.record_final(actor, self.env_steps, self.updates, self.wall_time_s,
                                       result)
        return result

    def close(self) -> None:
        """Close the progress log and wait for the evaluations during training handed over
        so far (the final evaluation may still add its row)."""
        self.log.close()
        if self.wandb is not None:
            self.wandb.close()
        if self.periodic is not None:
            self.periodic.close()
