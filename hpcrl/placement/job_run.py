"""One run's lifecycle, whatever runs it: one process, or every rank of an MPI job.

A serial run is a job of one rank over a communicator of one process
(:class:`~hpcrl.comm.world.SelfComm`, whose collectives return at once and never touch MPI):
the same job, roles, leader and learner loop as every rank of an MPI job runs, with the
in-process forms of the exchanges (the learner collects with its own envs, its collector acts
with its very policy). Per rank, :func:`prepare` builds the job from the config (checking the
world size first), has rank 0 choose or check the run directory for every rank, loads the
checkpoint to resume from, and builds this rank's role; :meth:`JobRun.train` runs it to the
end of the job. Under MPI any failure of a role ends the whole job within seconds, naming the
rank and its role; in one process it is raised, as any error of a Python call is.
"""
from __future__ import annotations

import os
import shutil
import sys
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

from hpcrl.algorithms import (
    action_space_problem,
    algorithm_type,
)
from hpcrl.comm import abort_on_error, finish_world, install_abort_handler
from hpcrl.comm.faults import watches_for_revocation
from hpcrl.envs.multiagent.play_modes import plays_league
from hpcrl.errors import ConfigError
from hpcrl.league.frozen import frozen_problems, seed_league
from hpcrl.league.selfplay_env import LEAGUE_DIR_VARIABLE
from hpcrl.league.snapshot_hook import SnapshotHook
from hpcrl.learning.replay_loop import UpdateFigures
from hpcrl.learning.run_writer import IntervalHook
from hpcrl.placement.job import RankJob, build_job
from hpcrl.placement.launch import resume_command, stop_message
from hpcrl.placement.leader import Leader
from hpcrl.placement.ranks.collector_rank import CollectorRank
from hpcrl.placement.ranks.evaluator_rank import EvaluatorRank
from hpcrl.placement.ranks.inference_rank import InferenceRank
from hpcrl.placement.ranks.job_control import collector_state_for
from hpcrl.placement.ranks.learner_rank import LearnerRank
from hpcrl.placement.ranks.updater_ranks import AsyncUpdaterRank, SyncUpdaterRank
from hpcrl.runtime.checkpoint import CheckpointError, load_checkpoint
from hpcrl.runtime.cpu import set_compute_threads, startup_objects_frozen
from hpcrl.runtime.finite import naming_last_good
from hpcrl.runtime.refused import exit_if_any_rank_refuses, exit_refused
from hpcrl.runtime.rng import seed_everything, set_rng_state
from hpcrl.runtime.run_dir import RunDir, default_run_dir
from hpcrl.runtime.signals import STOP_REQUEST
from hpcrl.scheme import COLLECTOR, EVALUATOR, INFERENCE, SPARE, UPDATER, spare_ranks
from hpcrl.sections.schema import Config


@dataclass
class JobRun:
    """One rank's part of a run: its role object (actor and counters, for inspection), the
    job and the run directory every rank agreed on."""

    ranked: Any
    job: RankJob
    run: RunDir
    console: IO[str] | None = None
    watch: Any = None  # the failure watch, where one runs
    stop_told: bool = False  # rank 0 said how the stopped run continues (before the ranks met)
    tells_stop: bool = True  # (a policy of a league job: the job's rank 0 says it, for all)
    restore_signals: Any = field(default=None, repr=False)

    @property
    def preempted(self) -> bool:
        """A stop signal (or too few live collectors) ended the run after a checkpoint."""
        return bool(self.ranked.preempted)

    @property
    def env_failed(self) -> bool:
        """The job stopped (after a checkpoint) because an env failed for good."""
        return bool(getattr(self.ranked, "env_failed", False))

    @property
    def leader(self) -> Any:
        """Rank 0's leader (its writer and evaluation), None on other ranks."""
        return getattr(self.ranked, "leader", None)

    @property
    def evaluation(self) -> dict[str, Any] | None:
        """The final evaluation (rank 0; None when none ran)."""
        leader = self.leader
        return None if leader is None else leader.evaluation

    @property
    def reloading(self) -> bool:
        """Whether the run's roles ended for a reload its interval hook asked for (rank 0)."""
        leader = self.leader
        return leader is not None and bool(leader.writer.reloading)

    @property
    def several(self) -> bool:
        """Whether the job has more than this one process."""
        return bool(self.job.world.Get_size() > 1)

    def train(self) -> JobRun:
        """Run this rank's role until the job ends; returns self."""
        job, run = self.job, self.run
        with ExitStack() as stack:
            if self.several:  # a failure of any role ends every rank (not the CLI alone)
                stack.enter_context(abort_on_error(job.world, job.describe))
            else:  # one process: its own resources close, and the error is raised
                stack.callback(self._release_on_error)
            # a NaN/inf message names the last good checkpoint (and, on rank 0, the update)
            stack.enter_context(naming_last_good(run.checkpoint_path, self._where()))
            stack.enter_context(startup_objects_frozen())
            self.ranked.run()
            if job.spares is not None:  # no more replacements; idle spares leave
                job.spares.release()
            self._done = True
        if self.restore_signals is not None:
            self.restore_signals()
        if job.memory is not None:  # every exchange through it has ended on this node
            job.memory.close()
        if self.watch is not None:
            self.watch.stop()
        # rank 0 of a job says how a stopped run continues before the ranks' last meeting:
        # once the others leave (with the stop's exit status) the launcher may end rank 0
        # before it could say it (one process leaves that to its caller)
        self.stop_told = self.several and job.is_leader and self.preempted and self.tells_stop
        if self.stop_told:
            print(stop_message(run.path, job.world.Get_size(), STOP_REQUEST.signum),
                  file=sys.stderr, flush=True)
        finish_world(job.world, [job.learners, job.gradient], survives=job.survives)
        return self

    _done = False

    def finish_spent(self) -> JobRun:
        """One process resumed with its budget spent: nothing is trained; the run is
        evaluated (when it asks for an evaluation) and its envs closed."""
        leader = self.leader
        assert leader is not None and not self.several
        try:
            leader.finish(self.ranked.actor)
        finally:
            self._release_on_error()
        return self

    def _release_on_error(self) -> None:
        """After an error in one process: close the run's records and its envs, put the
        signal handlers back (the error goes on to the caller)."""
        if self._done:
            return
        if self.restore_signals is not None:
            self.restore_signals()
        leader = self.leader
        if leader is not None:
            leader.writer.close()
        release = getattr(self.ranked, "release", None)
        if release is not None:
            release()

    def _where(self) -> Any:
        """What names the update a NaN or inf stopped (rank 0), for its message."""
        leader = self.leader
        if leader is None:
            return None
        return lambda: f"after {leader.updates} updates ({leader.env_steps} env steps)"


def _default_run_dir(job: RankJob) -> Path:
    """The default run directory of ``job``'s run: named by its algorithm and env."""
    return default_run_dir(job.config.algo.name, job.config.env.id)


def _choose_run_dir(job: RankJob, requested: Path | None, resume: bool
                    ) -> tuple[Path | None, str | None]:
    """Rank 0's choice: the requested directory or the default, made absolute (ranks may
    start in other directories), created; or why it cannot be used."""
    path = (requested if requested is not None else _default_run_dir(job)).absolute()
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


def agree_run_dir(job: RankJob, requested: Path | None, resume: bool = False) -> RunDir:
    """The run directory of every rank: rank 0 picks it (``requested``, or the default
    ``runs/<algo>-<env>-<time>``) and sends it to all; exits every rank with status 2, rank 0
    saying why, when a fresh run would overwrite one. A job of one process takes the
    directory as it is given (its caller refused one that holds a run, and the run's first
    file written there names what cannot be written)."""
    if job.world.Get_size() == 1:
        return RunDir(requested if requested is not None else _default_run_dir(job))
    choice: tuple[Path | None, str | None] = (None, None)
    if job.is_leader:
        choice = _choose_run_dir(job, requested, resume)
    path, problem = job.world.bcast(choice, root=0)
    if problem is not None or path is None:
        if job.is_leader:
            print(f"hpcrl: {problem}", file=sys.stderr, flush=True)
        exit_refused()
    return RunDir(Path(path))


def resume_state(job: RankJob, run: RunDir) -> dict[str, Any]:
    """The checkpoint to resume from, in today's form. Under MPI every rank exits with
    status 2, rank 0 saying why, when there is none or it was written by another world
    size; one process raises :class:`~hpcrl.runtime.checkpoint.CheckpointError`."""
    one = job.world.Get_size() == 1
    try:
        state = upgraded(load_checkpoint(run.checkpoint_path))
    except CheckpointError as err:
        if one:
            raise
        if job.is_leader:
            print(f"hpcrl: cannot resume: {err}", file=sys.stderr, flush=True)
        exit_refused()
    saved = state.get("world_size")
    if saved is not None and saved != job.world.Get_size():
        problem = (f"the checkpoint was written by {saved} ranks, this job has "
                   f"{job.world.Get_size()}")
        if one:
            raise CheckpointError(f"cannot resume: {problem}")
        if job.is_leader:
            print(f"hpcrl: cannot resume: {problem}", file=sys.stderr, flush=True)
        exit_refused()
    return state


def upgraded(state: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint in today's form: a one-process off-policy run's written before serial
    runs were jobs of one rank held its learner's state beside its collector's
    (``{"learner": ..., "collectors": [...]}``), where a learner rank's is under
    ``updater`` with the progress row it was in (empty between updates)."""
    placement = state.get("placement", {})
    if "updater" not in placement and "learner" in placement:
        state["placement"] = {"updater": {"learner": placement["learner"],
                                          "row": asdict(UpdateFigures())},
                              "collectors": placement["collectors"]}
    return state


def prepare(config: Config, run_dir: Path | None, resume: bool = False,
            console: IO[str] | None = None, world: Any = None,
            interval: IntervalHook | None = None, league_dir: Path | None = None,
            lost_ends_it: str | None = None) -> JobRun:
    """This rank's part of a run of ``config``, ready to :meth:`~JobRun.train`, in ``run_dir``
    (None: the default directory rank 0 picks for every rank); ``world``: the communicator
    of the job's ranks (default: MPI's world; a :class:`~hpcrl.comm.world.SelfComm` runs it
    in this process alone); ``interval``: rank 0's hook at a population member's intervals
    (:class:`~hpcrl.learning.run_writer.IntervalHook`); ``league_dir``: a self-play run's
    league (default ``RUN/league``; a league job's policies share the job's);
    ``lost_ends_it``: why a lost collector ends this job whatever its MPI."""
    set_compute_threads(config.train.torch_threads)
    seed_everything(config.seed)
    job = build_job(config, world, lost_ends_it)
    run = agree_run_dir(job, None if run_dir is None else Path(run_dir), resume)
    _action_space_check(job)
    if plays_league(config.env):
        _frozen_check(job)
    watch = None
    if job.world.Get_size() > 1:  # (a run of one process loads nothing of placement/mpi)
        from hpcrl.placement.mpi.spares import SparePool
        from hpcrl.placement.mpi.watch import watch_failures

        install_abort_handler(job.world, job.describe)
        if job.is_leader and spare_ranks(config.scheme):
            # rank 0 gives lost collectors' places to spares (where the job survives a loss)
            # and tells them to leave when it ends (every job)
            job.spares = SparePool(job)
        if job.survives or watches_for_revocation():
            watch = watch_failures(job)
    STOP_REQUEST.announce = job.is_leader  # every rank gets the signal; one says so
    restore_signals = STOP_REQUEST.install()
    state = resume_state(job, run) if resume else None
    if plays_league(config.env):
        interval = join_league(job, league_dir or run.path / "league", state, interval,
                               run.checkpoint_path)
    if state is not None and job.is_leader:
        set_rng_state(state["rng"])  # rank 0's generators, saved by it
    if job.is_leader and console is not None:
        _say_start(job, run, console)
    fresh = not resume and not run.path.exists()  # (a job of ranks made it already)
    try:
        ranked = make_role(job, state, console, run, interval)
    except BaseException:
        restore_signals()
        if fresh and run.path.exists():  # a run of one refused while building: leave no
            shutil.rmtree(run.path, ignore_errors=True)  # directory of a run never started
        raise
    return JobRun(ranked, job, run, console, watch, restore_signals=restore_signals)


def join_league(job: RankJob, league_dir: Path, state: dict[str, Any] | None,
                interval: IntervalHook | None, checkpoint: Path | None = None
                ) -> IntervalHook | None:
    """Self-play's part of a run: every rank's envs find the league in ``league_dir``
    (``$HPCRL_LEAGUE_DIR``, which env subprocesses inherit), and rank 0 publishes the trained
    policy's snapshots there (:class:`~hpcrl.league.snapshot_hook.SnapshotHook`, which on a
    resume first removes the snapshots taken after the checkpoint and publishes one that a
    stop at ``checkpoint`` left due), after the frozen
    policies of ``env.league.frozen`` (:func:`~hpcrl.league.frozen.seed_league`): every
    rank waits for that before an env starts a match."""
    os.environ[LEAGUE_DIR_VARIABLE] = str(league_dir)
    hook = interval
    if job.is_leader and interval is None:
        steps = int(state["counters"]["env_steps"]) if state is not None else 0
        seed_league(league_dir, job.config.env.league.frozen)  # policies trained elsewhere
        hook = SnapshotHook(league_dir, job.config.env.league, steps,
                            None if state is None else state.get("interval"), checkpoint)
    if job.world.Get_size() > 1:
        job.world.Barrier()
    return hook


def run_job(config: Config, run_dir: Path | None, resume: bool = False,
            console: IO[str] | None = None, world: Any = None) -> JobRun:
    """:func:`prepare` this rank's part of the run, then train it to the end of the job."""
    return prepare(config, run_dir, resume, console, world).train()


def _say_start(job: RankJob, run: RunDir, console: IO[str]) -> None:
    """Rank 0's start-up lines: what trains where, and how the job's exchanges go."""
    config, size = job.config, job.world.Get_size()
    who = "" if size == 1 else f"rank 0 of {size}: "
    print(f"hpcrl: {who}training {config.algo.name} on {config.env.id} in {run.path}",
          file=console, flush=True)
    for note in (job.transport_note, job.survival_note):
        if note is not None:
            print(f"hpcrl: {note}", file=console, flush=True)


def make_role(job: RankJob, state: dict[str, Any] | None, console: IO[str] | None,
              run: RunDir, interval: IntervalHook | None = None) -> Any:
    """This rank's role object: a collector, a spare, an inference rank, an evaluator, or a
    learner (rank 0's with the job's leader, which hands ``interval`` its checkpoints)."""
    role = job.role.role
    if role == COLLECTOR:
        return CollectorRank(job, collector_state_for(state, job.role.env_offset))
    if role == SPARE:  # (only a job of several ranks has spares)
        from hpcrl.placement.mpi.spares import SpareRank

        return SpareRank(job)
    if role == INFERENCE:
        return InferenceRank(job)
    if role == EVALUATOR:
        return EvaluatorRank(job)
    config = job.config
    leader = (Leader(job, run, stat_names(config), state, console, config.scheme.min_collectors,
                     interval) if job.is_leader else None)
    ranked: Any
    if role == UPDATER:  # a role of its own where the scheme has one: rank 0
        assert leader is not None
        updater = AsyncUpdaterRank if config.scheme.gradients == "async" else SyncUpdaterRank
        ranked = updater(job, state, leader)
    else:  # a gradient worker of any scheme and either family
        ranked = LearnerRank(job, state, leader)
    if leader is not None:
        leader.actor = ranked.actor  # the weights the evaluations during training copy
    return ranked


def stat_names(config: Config) -> tuple[str, ...]:
    """The figures the progress rows hold besides the common ones, as the algorithm's class
    declares them (its loss terms; off-policy, the replay ratio too)."""
    return algorithm_type(config.algo.name).reported_stats(config.rnd.enabled,
                                                           config.algo.addons)


def _frozen_check(job: RankJob) -> None:
    """The frozen policies of ``env.league.frozen`` must play this game as the trained
    policy does (checked by rank 0, where the files are read: a config's checks do not load
    policies); every rank of a job exits with status 2 where one cannot, one process raises
    a ConfigError."""
    frozen, spaces = job.config.env.league.frozen, job.spaces
    problem = None
    if frozen and job.is_leader:
        moves = spaces.categories[0] if spaces.discrete and spaces.categories else 0
        problem = "; ".join(frozen_problems(frozen, spaces.obs_shape, moves,
                                            job.config.env.league.player)) or None
    exit_if_any_rank_refuses(job.world, problem, job.describe())


def _action_space_check(job: RankJob) -> None:
    """The algorithm must act in the env: every rank of a job exits with status 2 where it
    cannot; one process raises a ConfigError."""
    problem = action_space_problem(job.config.algo.name, job.spaces, job.config.env.id)
    if problem and job.world.Get_size() == 1:
        raise ConfigError(problem)
    exit_if_any_rank_refuses(job.world, problem, job.describe())


def train_mpi(config: Config, run_dir: Path | None, resume: bool = False,
              console: IO[str] | None = None) -> JobRun:
    """Run this rank's role of ``config``'s scheme in the MPI job this process belongs to
    until the job ends (:func:`run_job` over MPI's world)."""
    return run_job(config, run_dir, resume, console)
