"""The Python API: build a config from components and train it, on one process or many.

``hpcrl train`` is a thin layer over :func:`train` and :func:`resume`. A script that calls
them runs the same way under ``mpiexec -n 8 python my_experiment.py``: every rank executes
the script, and each call runs this rank's part of the scheme (the world size must be the
one the scheme needs, as for the CLI). Components of your own are given as classes (or their
``module:Name`` import paths) where the config names a component::

    import hpcrl

    config = hpcrl.make_config(
        {"algo": {"name": KLPenaltyPPO, "kwargs": {"target_kl": 0.01}},
         "actor": {"network": MyEncoder, "hidden_sizes": [64]},
         "env": {"id": "CartPole-v1", "wrappers": [ScaleReward]}},
        sets=["scheme.preset=ddppo"])
    result = hpcrl.train(config, run_dir="runs/kl")

A class defined in the script itself is recorded under the script's module name
(``myapi:KLPenaltyPPO`` for ``python myapi.py``). The script's own process, its MPI ranks and
its env subprocesses find the class in ``__main__`` and never import the script again, so an
unguarded script trains once. A later process (``hpcrl eval``, ``hpcrl.load_policy``,
``hpcrl.resume``) has to import the script: it does so only when the script's training sits
under ``if __name__ == "__main__":``, and refuses otherwise, naming the line (the rule of
:mod:`hpcrl.components.scripts`); a call of :func:`train` or :func:`resume` while hpcrl
imports a component's module raises
:class:`~hpcrl.components.scripts.TrainingDuringImport` instead of training.
"""
from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from hpcrl.components.import_paths import path_of
from hpcrl.components.scripts import refuse_training_during_import
from hpcrl.config.loader import load_config, resolve
from hpcrl.errors import ConfigError, ExplainedError
from hpcrl.runtime.run_dir import RunDir
from hpcrl.sections.schema import Config


class RunDirTaken(ExplainedError):
    """A fresh run was asked for in a directory that already holds one."""


@dataclass
class TrainResult:
    """What a call to :func:`train` or :func:`resume` did on this process.

    ``evaluation`` is the final deterministic evaluation (None on ranks other than 0, when
    ``train.eval_episodes`` is 0, or when a stop signal ended the run after a checkpoint:
    ``preempted``; ``env_failed`` too when an env that failed for good stopped it).
    ``world_size`` is the number of MPI ranks of the job (1 in serial)."""

    run_dir: Path
    evaluation: dict[str, Any] | None
    preempted: bool
    world_size: int = 1
    is_leader: bool = True
    stop_told: bool = False  # how the stopped run continues was said already (rank 0 of MPI)
    env_failed: bool = False


def _plugin_paths(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` with each class in a component key replaced by its import path."""
    out = {k: dict(v) if isinstance(v, Mapping) else v for k, v in data.items()}
    algo, actor, env = (out.get(s) for s in ("algo", "actor", "env"))
    if isinstance(algo, dict) and "name" in algo:
        algo["name"] = path_of(algo["name"])
    if isinstance(actor, dict) and actor.get("network"):
        actor["network"] = path_of(actor["network"])
    if isinstance(env, dict) and isinstance(env.get("wrappers"), (list, tuple)):
        env["wrappers"] = [
            {path_of(next(iter(w))): dict(next(iter(w.values())))} if isinstance(w, Mapping)
            else path_of(w) for w in env["wrappers"]]
    return out


def make_config(config: Config | Mapping[str, Any] | str | Path | None = None,
                sets: Sequence[str] = ()) -> Config:
    """A checked :class:`Config` from a YAML file's path, a nested mapping (component keys
    may hold classes), a Config, or None (the embedded default), with ``KEY=VALUE``
    overrides; raises :class:`~hpcrl.config.loader.ConfigError` naming the key and the fix."""
    if isinstance(config, Config):
        from hpcrl.config.loader import to_dict

        config = to_dict(config)
    if isinstance(config, Mapping):
        return resolve(_plugin_paths(config), sets)[0]
    return load_config(None if config is None else str(config), list(sets))


def train(config: Config | Mapping[str, Any] | str | Path | None = None, *,
          sets: Sequence[str] = (), run_dir: str | Path | None = None,
          console: IO[str] | None | str = "stderr") -> TrainResult:
    """Train a fresh run of ``config`` (see :func:`make_config`) in ``run_dir`` (default
    ``runs/<algo>-<env>-<time>``), serially or, started under ``mpiexec``/``srun``, as this
    rank's part of the scheme; progress goes to ``console`` (the process's stderr by default;
    None: quiet). Called while hpcrl imports a component's module, it raises
    :class:`~hpcrl.components.scripts.TrainingDuringImport` and trains nothing."""
    refuse_training_during_import("train")
    cfg = make_config(config, sets)
    from hpcrl.placement.launch import launched_rank

    stream = _stream(console)
    if cfg.pbt.mutate and stream is not None and launched_rank() == 0:
        print("hpcrl: note: this config has a pbt section, which hpcrl train does not read: "
              "it trains one run; `hpcrl pbt` trains the population", file=stream, flush=True)
    return _run(cfg, None if run_dir is None else Path(run_dir), False, stream)


def resume(run_dir: str | Path, *, sets: Sequence[str] = (),
           console: IO[str] | None | str = "stderr") -> TrainResult:
    """Continue the run in ``run_dir`` from its last checkpoint (only ``train.*`` keys may
    change through ``sets``); refused like :func:`train` while a component's module is being
    imported. A run that already trained its budget and was evaluated trains and evaluates
    nothing: it says so and how to extend it, and the result holds its saved evaluation."""
    from hpcrl.placement.serial_run import resume_config

    refuse_training_during_import("resume")
    run = RunDir(Path(run_dir))
    cfg = resume_config(run, list(sets))
    done = _complete(run, cfg, _stream(console))
    return done if done is not None else _run(cfg, run.path, True, _stream(console))


def _complete(run: RunDir, cfg: Config, console: IO[str] | None) -> TrainResult | None:
    """The result of a run that has nothing left to do under ``cfg`` (it is finished and
    its checkpoint reached ``train.total_env_steps``: progress rows may run ahead of a
    checkpoint that could not be written), said on the console; else None."""
    from hpcrl.placement.launch import launched_rank, launched_size
    from hpcrl.runtime.checkpoint import checkpoint_env_steps
    from hpcrl.runtime.run_dir import is_finished

    if not (is_finished(run) and run.checkpoint_path.is_file()):
        return None
    steps, budget = checkpoint_env_steps(run.checkpoint_path), cfg.train.total_env_steps
    if steps < budget:
        return None
    leader = launched_rank() == 0
    evaluation = json.loads(run.eval_path.read_text()) if run.eval_path.is_file() else None
    if console is not None and leader:
        evaluated = " and was evaluated (eval.json)" if evaluation is not None else ""
        print(f"hpcrl: '{run.path}' is complete: it trained {steps:,} env steps of its "
              f"train.total_env_steps={budget:,}{evaluated}; nothing to resume. To train it "
              f"further: hpcrl train --resume {run.path} --set "
              f"train.total_env_steps={2 * budget}", file=console, flush=True)
    return TrainResult(run.path, evaluation, False, launched_size(), leader)


def _stream(console: IO[str] | None | str) -> IO[str] | None:
    """``"stderr"``: the process's stderr as it is now (a test runner may have replaced it)."""
    return sys.stderr if console == "stderr" else console  # type: ignore[return-value]


def _run(cfg: Config, run_dir: Path | None, resume: bool,
         console: IO[str] | None) -> TrainResult:
    from hpcrl.placement.job import wants_mpi
    from hpcrl.placement.serial_run import Trainer
    from hpcrl.runtime.run_dir import default_run_dir

    if cfg.policies:  # a league job of named policies, each a job of its own
        return _run_league(cfg, run_dir, resume, console)
    if cfg.env.league.reset_fraction > 0:
        raise ConfigError(f"config key 'env.league.reset_fraction' ({cfg.env.league.reset_fraction}"
                          f") resets an exploiter of a league job; set it in a policies entry, "
                          f"e.g. policies: {{main: {{set: {{env.league.reset_fraction: "
                          f"{cfg.env.league.reset_fraction}}}}}}} (a job of one named policy "
                          f"runs in one process too)")
    if wants_mpi(cfg):
        return _run_mpi(cfg, run_dir, resume, console)
    run = RunDir(run_dir if run_dir is not None else default_run_dir(cfg.algo.name, cfg.env.id))
    if not resume and run.checkpoint_path.exists():
        raise RunDirTaken(f"'{run.path}' already holds a run; resume it with --resume "
                          f"{run.path} (hpcrl.resume in Python) or pick another --run-dir")
    trainer = Trainer(cfg, run, resume=resume, console=console)
    evaluation = trainer.train()
    return TrainResult(run.path, evaluation, trainer.preempted, env_failed=trainer.env_failed)


def _run_league(cfg: Config, run_dir: Path | None, resume: bool,
                console: IO[str] | None) -> TrainResult:
    """This rank's part of a league job of ``cfg.policies``; MPI is finalised when it ends."""
    from hpcrl.comm import finalize_mpi
    from hpcrl.placement.launch import stop_message
    from hpcrl.placement.league_job import train_league_job
    from hpcrl.runtime.signals import STOP_REQUEST

    done = train_league_job(cfg, run_dir, resume, console)
    job_run = done.job_run
    told = done.is_leader and done.world_size > 1 and job_run.preempted
    if told:  # how the whole job goes on (no policy's rank 0 says it for its own run alone)
        print(stop_message(done.run.path, done.world_size, STOP_REQUEST.signum),
              file=sys.stderr, flush=True)
    if done.world_size > 1:
        finalize_mpi()
    return TrainResult(done.run.path, job_run.evaluation, job_run.preempted, done.world_size,
                       done.is_leader, told, job_run.env_failed)


def _run_mpi(cfg: Config, run_dir: Path | None, resume: bool,
             console: IO[str] | None) -> TrainResult:
    """This rank's part of an MPI job; MPI is finalised when it ends (as the CLI does)."""
    from hpcrl.comm import finalize_mpi
    from hpcrl.placement.job_run import train_mpi

    done = train_mpi(cfg, run_dir, resume=resume, console=console)
    size, leader = done.job.world.Get_size(), done.job.is_leader
    finalize_mpi()
    return TrainResult(done.run.path, done.evaluation, done.preempted, size, leader,
                       done.stop_told, done.env_failed)
