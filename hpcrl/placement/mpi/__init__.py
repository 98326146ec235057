"""MPI placement: every rank runs the loop of its role in the scheme's rank table.

``train_mpi`` is what ``hpcrl train`` calls under ``mpirun``/``srun``: it builds this rank's
job from the config (checking the world size first), has rank 0 choose or check the run
directory for every rank, installs the abort handler (an exception on any rank ends the whole
job within seconds, naming the rank and its role), and runs the role.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from hpcrl.comm import (
    abort_job,
    abort_on_error,
    finish_world,
    install_abort_handler,
    set_expendable,
)
from hpcrl.comm.faults import FailureWatch, watches_for_revocation
from hpcrl.config.schema import Config
from hpcrl.placement.mpi.job import MpiJob, build_job, exit_if_any_rank_refuses, wants_mpi
from hpcrl.placement.mpi.launcher import resume_command
from hpcrl.runtime.checkpoint import CheckpointError, load_checkpoint
from hpcrl.runtime.cpu import set_compute_threads, startup_objects_frozen
from hpcrl.runtime.finite import naming_last_good
from hpcrl.runtime.rng import seed_everything
from hpcrl.runtime.run_dir import RunDir, default_run_dir
from hpcrl.runtime.signals import STOP_REQUEST
from hpcrl.scheme import COLLECTOR, INFERENCE, SPARE, UPDATER, spare_ranks

__all__ = ["MpiRun", "agree_run_dir", "train_mpi", "wants_mpi"]


@dataclass
class MpiRun:
    """What one rank did: its role object (actor and counters, for inspection), the job and
    the run directory every rank agreed on."""

    ranked: Any
    job: MpiJob
    run: RunDir
    stop_told: bool = False  # rank 0 said how the stopped run continues (before the ranks met)

    @property
    def preempted(self) -> bool:
        """A stop signal ended the run after a checkpoint."""
        return bool(self.ranked.preempted)


def _choose_run_dir(job: MpiJob, requested: Path | None, resume: bool
                    ) -> tuple[Path | None, str | None]:
    """Rank 0's choice: the requested directory or serial's default, made absolute (ranks may
    start in other directories), created; or why it cannot be used."""
    path = (requested if requested is not None else default_run_dir(job.config)).absolute()
    if resume:
        return path, None
    if RunDir(path).checkpoint_path.exists():
        resume_it = resume_command(path, job.world.Get_size())
        return None, (f"'{path}' already holds a run; resume it with `{resume_it}` or pick "
                      f"another --run-dir")
    try:
        path.mkdir(parents=True, exist_ok=True)  # claims a default name before another job
    except OSError as err:
        return None, (f"cannot create the run directory '{path}': {err.strerror}; pick "
                      f"another --run-dir")
    return path, None


def agree_run_dir(job: MpiJob, requested: Path | None, resume: bool = False) -> RunDir:
    """The run directory of every rank: rank 0 picks it (``requested``, or the default
    ``runs/<algo>-<env>-<time>`` serial runs use) and sends it to all; exits every rank with
    status 2, rank 0 saying why, when a fresh run would overwrite one."""
    choice: tuple[Path | None, str | None] = (None, None)
    if job.is_leader:
        choice = _choose_run_dir(job, requested, resume)
    path, problem = job.world.bcast(choice, root=0)
    if problem is not None or path is None:
        if job.is_leader:
            print(f"hpcrl: {problem}", file=sys.stderr, flush=True)
        sys.exit(2)
    return RunDir(Path(path))


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


def train_mpi(config: Config, run_dir: Path | None, resume: bool = False,
              console: IO[str] | None = None) -> MpiRun:
    """Run this rank's role of ``config``'s scheme until the job ends, in ``run_dir`` (None:
    the default directory rank 0 picks for every rank)."""
    from hpcrl.placement.mpi.collector_rank import CollectorRank
    from hpcrl.placement.mpi.inference_rank import InferenceRank
    from hpcrl.placement.mpi.leader import Leader
    from hpcrl.placement.mpi.learners import SyncUpdaterRank, WorkerRank
    from hpcrl.placement.mpi.learners_async import AsyncUpdaterRank, AsyncWorkerRank

    set_compute_threads(config.train.torch_threads)
    seed_everything(config.seed)
    job = build_job(config)
    run = agree_run_dir(job, None if run_dir is None else Path(run_dir), resume)
    _action_space_check(job)
    install_abort_handler(job.world, job.describe)
    if job.is_leader and job.survives and spare_ranks(config.scheme):
        from hpcrl.placement.mpi.spares import SparePool

        job.spares = SparePool(job)  # rank 0 gives lost collectors' places to spares
    watch = _watch_failures(job) if job.survives or watches_for_revocation() else None
    STOP_REQUEST.announce = job.is_leader  # every rank gets the signal; one says so
    STOP_REQUEST.install()
    state = _resume_state(job, run) if resume else None
    role = job.role.role
    if job.is_leader and console is not None:
        print(f"hpcrl: rank 0 of {job.world.Get_size()}: training {config.algo.name} on "
              f"{config.env.id} in {run.path}", file=console, flush=True)
        if job.transport_note is not None:
            print(f"hpcrl: {job.transport_note}", file=console, flush=True)
        if job.survival_note is not None:
            print(f"hpcrl: {job.survival_note}", file=console, flush=True)
    if role == COLLECTOR:
        from hpcrl.placement.mpi.learners import collector_state_for

        ranked: Any = CollectorRank(job, collector_state_for(state, job.role.env_offset))
    elif role == SPARE:
        from hpcrl.placement.mpi.spares import SpareRank

        ranked = SpareRank(job)
    elif role == INFERENCE:
        ranked = InferenceRank(job)
    else:
        stats = _stat_names(config)
        leader = Leader(job, run, stats, state, console) if job.is_leader else None
        asynchronous = config.scheme.gradients == "async"
        if job.off_policy:
            from hpcrl.placement.mpi.replay_learner_rank import ReplayLearnerRank

            # its one learner rank is rank 0, the leader: config validation asks for
            # scheme.gradient_workers=1 and no updater rank, so rank_table puts it first
            assert leader is not None
            ranked = ReplayLearnerRank(job, state, leader)
        elif role == UPDATER:
            assert leader is not None  # rank_table gives an updater, when there is one, rank 0
            ranked = (AsyncUpdaterRank if asynchronous else SyncUpdaterRank)(job, state, leader)
        elif asynchronous:
            ranked = AsyncWorkerRank(job, state)
        else:
            ranked = WorkerRank(job, state, leader)
        if leader is not None:
            leader.actor = ranked.actor  # the weights the evaluations during training copy
    # any failure of the role ends every rank (the CLI must not catch it on this rank alone);
    # a NaN/inf message names the last good checkpoint
    with abort_on_error(job.world, job.describe), naming_last_good(run.checkpoint_path), \
            startup_objects_frozen():
        ranked.run()
        if job.spares is not None:  # no more replacements; idle spares leave
            job.spares.release()
    if job.memory is not None:  # every exchange through it has ended on this node
        job.memory.close()
    if watch is not None:
        watch.stop()
    # rank 0 says how a stopped run continues before the ranks' last meeting: once the others
    # leave (with the stop's exit status) the launcher may end rank 0 before it could say it
    told = job.is_leader and bool(ranked.preempted)
    if told:
        from hpcrl.placement.mpi.launcher import stop_message

        print(stop_message(run.path, job.world.Get_size(), STOP_REQUEST.signum),
              file=sys.stderr, flush=True)
    finish_world(job.world, [job.learners, job.gradient], survives=job.survives)
    return MpiRun(ranked, job, run, told)


def _watch_failures(job: MpiJob) -> FailureWatch:
    """Start this rank's watch for dead ranks. In a job that survives lost collectors a
    collector's own failure ends it alone, any other rank's loss ends the job, and rank 0
    says one line per lost collector. In any other job under Open MPI's ULFM, where a dead
    rank does not end the job by itself, any loss ends the job, and a job another rank
    ended (:mod:`hpcrl.comm.job_end`) ends this rank with status 1."""
    from hpcrl.comm.faults import failed_ranks, lost_rank_message

    def expendable(rank: int) -> bool:
        return job.survives and job.table[rank].role in (COLLECTOR, SPARE)

    def describe(rank: int) -> str:
        host = job.peers[rank].host if job.peers is not None else "?"
        return f"{job.describe_rank(rank)} on {host}"

    def essential_lost() -> str | None:
        dead = sorted(r for r in failed_ranks(job.world) if not expendable(r))
        if not dead:
            return None
        return lost_rank_message(dead[0], describe(dead[0]), job.survives)

    def tell(line: str) -> None:
        job.say(f"hpcrl: {line}")

    say = tell if job.is_leader else None  # rank 0 alone says what was lost

    set_expendable(expendable(job.rank), essential_lost)
    return FailureWatch(job.world, expendable, describe,
                        lambda message: abort_job(job.world, message), say,
                        survives=job.survives,
                        on_lost=None if job.spares is None else job.spares.on_lost).start()


def _stat_names(config: Config) -> tuple[str, ...]:
    """The loss terms the progress rows hold (and, off-policy, the replay ratio)."""
    if config.algo.capabilities.replay:
        from hpcrl.core.algorithms.offpolicy import offpolicy_class

        return offpolicy_class(config.algo.name).stat_names + ("replay_ratio",)
    from hpcrl.core.algorithms import algorithm_class

    return algorithm_class(config.algo.name).reported_stats(config.rnd.enabled)


def _action_space_check(job: MpiJob) -> None:
    """Every rank exits with status 2 when the algorithm cannot act in the env."""
    if not job.off_policy:
        return
    from hpcrl.core.algorithms.offpolicy import action_space_problem

    problem = action_space_problem(job.config.algo.name, job.spaces, job.config.env.id)
    exit_if_any_rank_refuses(job.world, problem, job.describe())
