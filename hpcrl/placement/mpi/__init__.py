"""MPI placement: every rank runs the loop of its role in the scheme's rank table.

``train_mpi`` is what ``hpcrl train`` calls under ``mpirun``/``srun``: it builds this rank's
job from the config, installs the abort handler (an exception on any rank ends the whole
job within seconds, naming the rank and its role), and runs the role.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import IO, Any, Optional

import torch

from hpcrl.comm import finish_world, install_abort_handler
from hpcrl.config.offpolicy import OFF_POLICY_ALGOS
from hpcrl.config.schema import Config
from hpcrl.placement.mpi.job import MpiJob, build_job, wants_mpi
from hpcrl.runtime.checkpoint import CheckpointError, load_checkpoint
from hpcrl.runtime.finite import naming_last_good
from hpcrl.runtime.rng import seed_everything
from hpcrl.runtime.signals import STOP_REQUEST
from hpcrl.runtime.run_dir import RunDir
from hpcrl.scheme import COLLECTOR, UPDATER

__all__ = ["train_mpi", "wants_mpi"]


def _resume_state(job: MpiJob, run: RunDir) -> dict[str, Any]:
    try:
        state = load_checkpoint(run.checkpoint_path)
    except CheckpointError as err:
        if job.is_leader:
            print(f"hpcrl: cannot resume: {err}", file=sys.stderr, flush=True)
        sys.exit(2)
    saved = state.get("world_size")
    if saved is not None and saved != job.world.Get_size():
        if job.is_leader:
            print(f"hpcrl: cannot resume: the checkpoint was written by {saved} ranks, this job "
                  f"has {job.world.Get_size()}", file=sys.stderr, flush=True)
        sys.exit(2)
    return state


def train_mpi(config: Config, run_dir: Path, resume: bool = False,
              console: Optional[IO[str]] = None) -> Any:
    """Run this rank's role of ``config``'s scheme until the job ends; returns the role
    object (its actor and counters, for inspection)."""
    from hpcrl.placement.mpi.collector_rank import CollectorRank
    from hpcrl.placement.mpi.leader import Leader
    from hpcrl.placement.mpi.learners import SyncUpdaterRank, WorkerRank
    from hpcrl.placement.mpi.learners_async import AsyncUpdaterRank, AsyncWorkerRank

    if config.train.torch_threads:
        torch.set_num_threads(config.train.torch_threads)
    seed_everything(config.seed)
    job = build_job(config)
    _action_space_check(job)
    install_abort_handler(job.world, job.describe)
    STOP_REQUEST.install()
    run = RunDir(Path(run_dir))
    state = _resume_state(job, run) if resume else None
    role = job.role.role
    if job.is_leader and console is not None:
        print(f"hpcrl: rank 0 of {job.world.Get_size()}: training {config.algo.name} on "
              f"{config.env.id} in {run.path}", file=console, flush=True)
    if role == COLLECTOR:
        ranked: Any = CollectorRank(job, collector_state(state, job.role.env_offset))
    else:
        stats = _stat_names(config)
        leader = Leader(job, run, stats, state, console) if job.is_leader else None
        asynchronous = config.scheme.gradients == "async"
        if config.algo.name in OFF_POLICY_ALGOS:
            from hpcrl.placement.mpi.replay_learner_rank import ReplayLearnerRank

            ranked = ReplayLearnerRank(job, state, leader)
        elif role == UPDATER:
            ranked = (AsyncUpdaterRank if asynchronous else SyncUpdaterRank)(job, state, leader)
        elif asynchronous:
            ranked = AsyncWorkerRank(job, state)
        else:
            ranked = WorkerRank(job, state, leader)
    with naming_last_good(run.checkpoint_path):  # a NaN/inf message names the checkpoint
        ranked.run()
    finish_world(job.world, [job.learners, job.gradient])
    return ranked


def collector_state(state: Optional[dict[str, Any]], offset: int) -> Optional[dict[str, Any]]:
    from hpcrl.placement.mpi.learners import collector_state_for

    return collector_state_for(state, offset)


def _stat_names(config: Config) -> tuple[str, ...]:
    """The loss terms the progress rows hold (and, off-policy, the replay ratio)."""
    if config.algo.name in OFF_POLICY_ALGOS:
        from hpcrl.core.algorithms.offpolicy import OFF_POLICY_ALGORITHMS

        return OFF_POLICY_ALGORITHMS[config.algo.name].stat_names + ("replay_ratio",)
    from hpcrl.core.algorithms import ALGORITHMS

    return ALGORITHMS[config.algo.name].stat_names


def _action_space_check(job: MpiJob) -> None:
    """Every rank exits with status 2 when the algorithm cannot act in the env."""
    if job.config.algo.name not in OFF_POLICY_ALGOS:
        return
    from hpcrl.core.algorithms.offpolicy import action_space_problem

    problem = action_space_problem(job.config.algo.name, job.spaces, job.config.env.id)
    if problem:
        if job.is_leader:
            print(f"hpcrl: {problem}", file=sys.stderr, flush=True)
        sys.exit(2)
