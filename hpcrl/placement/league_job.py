"""A league job of several trained policies: each a job of its own on its share of the ranks.

The ``policies`` section names the trained policies (AlphaStar's mains and exploiters, or
several mains). Each trains as a run of its own, ``RUN/policies/<name>``, made from the job's
config (:func:`~hpcrl.config.policy_configs.policy_config`): the launch's ranks are split
(:func:`~hpcrl.config.policy_configs.rank_split`) into one communicator per policy, and on
its communicator each runs the whole job of :mod:`~hpcrl.placement.job_run` as any run does:
its scheme's learner group (updater, gradient workers), collectors, inference ranks and
evaluators, its family, checkpoints, resumes and stop signals. They meet in the league,
``RUN/league``: every policy's snapshots join it as ``<name>-<env steps>``, every env draws
its opponents from it (a main exploiter from the mains' only), and every match is logged
there, so ``hpcrl league RUN`` rates them all together.

Why a job per policy rather than one job routing each seat's steps: a turn-based game's
trajectory belongs to one seat, so a learner trains on its own policy's matches only
(AlphaStar's actors play one learning agent against the league), and a job per policy then
needs no code path of its own: every scheme and family, plug-ins included, trains a policy
of a league as it trains a lone run, and a policy's collector lost under ULFM or its NaN
touches no other. An exploiter that is to start again (``env.league.reset_fraction``) ends
its roles after the snapshot that asked, its checkpoint goes back to the weights it started
with (:mod:`~hpcrl.league.resets`), and it goes on from there.

A lost collector ends a league job of several policies under any MPI (each policy's job
would go on without it under ULFM, but the policies meet on every rank of the launch at the
end), and every policy resumes from its checkpoint. One process (no launcher) trains a job
of one policy; several need a rank each at least,
and a launch of the wrong size is refused before any rank starts, naming the size to launch.
Opponents from another policy's snapshots are drawn as those files appear, so a league job of
several policies is not repeated to the bit (a policy's own snapshots follow its clock, as
in a lone run).
"""
from __future__ import annotations

import sys
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from hpcrl.comm import abort_on_error
from hpcrl.comm.world import SelfComm, world_comm
from hpcrl.config.loader import dump_yaml
from hpcrl.config.policy_configs import policy_configs, rank_split
from hpcrl.errors import ConfigError
from hpcrl.league.resets import initial_weights_path, reset_checkpoint, save_initial_weights
from hpcrl.league.snapshot_hook import publish_missed, reset_drawn
from hpcrl.placement.job_run import JobRun, prepare
from hpcrl.placement.launch import launched_size
from hpcrl.runtime.checkpoint import load_checkpoint
from hpcrl.runtime.refused import exit_refused
from hpcrl.runtime.run_dir import RunDir, default_run_dir, write_run_file
from hpcrl.runtime.signals import STOP_REQUEST
from hpcrl.sections.league_section import LeagueConfig
from hpcrl.sections.schema import Config

POLICIES = "policies"  # RUN/policies/<name>: each policy's run
# why a policy's job of a league job of several does not go on without a lost collector
LOST_ENDS_IT = ("the policies of a league job meet on every rank of the launch at its end, "
                "which a lost rank would fail; resume the job from its checkpoints")
LEAGUE = "league"  # RUN/league: the league every policy plays in


def policy_run_dir(run_dir: Path, name: str) -> Path:
    """The run directory of policy ``name`` of the league job in ``run_dir``."""
    return Path(run_dir) / POLICIES / name


class PrefixedLines:
    """A console whose every line starts with ``prefix`` (each policy's progress rows name
    it: the policies' rank 0s write to one terminal)."""

    def __init__(self, stream: IO[str], prefix: str) -> None:
        self.stream, self.prefix = stream, prefix
        self._line_start = True

    def write(self, text: str) -> int:
        """Write ``text``, the prefix before each line's first character."""
        out = []
        for piece in text.splitlines(keepends=True):
            if self._line_start and piece:
                out.append(self.prefix)
            out.append(piece)
            self._line_start = piece.endswith(("\n", "\r"))
        self.stream.write("".join(out))
        return len(text)

    def flush(self) -> None:
        """Flush the stream underneath."""
        self.stream.flush()

    def isatty(self) -> bool:
        """Whether the stream underneath is a terminal."""
        return bool(getattr(self.stream, "isatty", lambda: False)())


@dataclass
class LeagueJobRun:
    """This rank's part of a league job: its policy's job run, and the job's directory."""

    policy: str
    job_run: JobRun
    run: RunDir
    world_size: int
    is_leader: bool  # rank 0 of the whole launch


def train_league_job(config: Config, run_dir: Path | None, resume: bool,
                     console: IO[str] | None) -> LeagueJobRun:
    """Train every policy of ``config``'s ``policies`` section on its share of the launch's
    ranks (see the module), this rank's policy to the end of its budget or to a stop."""
    configs = policy_configs(config)  # every policy's config refused before any work
    world = world_comm() if launched_size() > 1 else SelfComm()
    size, rank = world.Get_size(), world.Get_rank()
    split = rank_split(config, size, configs)
    color = _slice_of(split, rank)
    name = split[color][0]
    run = _agree_run_dir(world, config, run_dir, resume)
    own = configs[name]
    env, budget = own.env, own.train
    # one communicator per policy; a policy of one rank runs as one process does
    comm: Any = world.Split(color, rank) if size > 1 else SelfComm()
    if split[color][1] == 1 and not isinstance(comm, SelfComm):
        comm.Free()
        comm = SelfComm()
    own_console = console
    if console is not None and len(split) > 1:
        own_console = PrefixedLines(console, f"[{name}] ")  # type: ignore[assignment]
    with ExitStack() as stack:
        if size > 1:  # a policy that fails ends the whole job, naming it
            stack.enter_context(abort_on_error(world, lambda: f"policy {name}"))
        job_run = _train_policy(own, env.league, budget.total_env_steps,
                                policy_run_dir(run.path, name), resume,
                                own_console if comm.Get_rank() == 0 else None, comm, world,
                                run.path / LEAGUE)
    world.Barrier()  # every policy's job has ended
    if not isinstance(comm, SelfComm):
        comm.Free()
    return LeagueJobRun(name, job_run, run, size, rank == 0)


def _slice_of(split: list[tuple[str, int]], rank: int) -> int:
    """The index of the policy whose ranks hold world rank ``rank``."""
    end = 0
    for index, (_, ranks) in enumerate(split):
        end += ranks
        if rank < end:
            return index
    raise AssertionError(f"rank {rank} beyond the split {split}")


def _agree_run_dir(world: Any, config: Config, requested: Path | None,
                   resume: bool) -> RunDir:
    """The job's directory, chosen by rank 0 (``requested`` or ``runs/league-<env>-<time>``)
    and sent to every rank, with the job's config written there; a fresh job refused where
    one was trained already (every rank exits with status 2, rank 0 saying why)."""
    choice: tuple[Path | None, str | None] = (None, None)
    if world.Get_rank() == 0:
        env = config.env
        path = (requested if requested is not None
                else default_run_dir("league", env.id)).absolute()
        if not resume and (path / POLICIES).exists():
            choice = (None, f"'{path}' already holds a league job; resume it with `hpcrl "
                            f"train --resume {path}` (under the same launch) or pick another "
                            f"--run-dir")
        else:
            path.mkdir(parents=True, exist_ok=True)
            if not resume:
                write_run_file("run config", RunDir(path).config_path, dump_yaml(config))
            choice = (path, None)
    path, problem = world.bcast(choice, root=0)
    if problem is not None or path is None:
        if world.Get_rank() == 0:
            if world.Get_size() > 1:
                print(f"hpcrl: {problem}", file=sys.stderr, flush=True)
        if world.Get_size() == 1:
            raise ConfigError(str(problem))
        exit_refused()
    return RunDir(Path(path))


def _train_policy(config: Config, league: LeagueConfig, budget: int, run_path: Path,
                  resume: bool, console: IO[str] | None, comm: Any, world: Any,
                  league_dir: Path) -> JobRun:
    """Train one policy's run of ``config`` (its league keys: ``league``; its env steps:
    ``budget``) on ``comm`` (its ranks), starting again from its initial weights each time
    its snapshot hook asks for a reset; returns its last job run."""
    first = True
    if resume and comm.Get_rank() == 0:
        _settle_a_stop(league, league_dir, run_path, budget, console)
    comm.Barrier()  # (the other ranks resume from the checkpoint rank 0 may have reset)
    while True:
        job_run = prepare(config, run_path, resume, console, world=comm, league_dir=league_dir,
                          lost_ends_it=LOST_ENDS_IT if world.Get_size() > comm.Get_size()
                          else None)
        job_run.tells_stop = False  # (the job's rank 0 says how the whole job continues)
        STOP_REQUEST.announce = world.Get_rank() == 0  # one rank of the launch says it
        if first:
            if (job_run.leader is not None and not resume
                    and league.reset_fraction > 0):
                save_initial_weights(job_run.ranked.actor, run_path)
            world.Barrier()  # every policy's league is ready before any match starts
            first = False
        leader = job_run.leader
        if leader is not None and leader.writer.done and not job_run.several:
            job_run.finish_spent()  # (a resumed policy whose budget was spent)
        else:
            job_run.train()
        hook = leader.writer.interval if leader is not None else None
        reset = bool(job_run.reloading and getattr(hook, "reset_due", False))
        if not comm.bcast(reset, root=0):
            return job_run
        if leader is not None and hook is not None:
            reset_checkpoint(job_run.run.checkpoint_path, initial_weights_path(run_path))
            if console is not None:
                print(f"hpcrl: {league.player} starts again from its initial "
                      f"weights after {hook.reset_at:,} env steps (its snapshot stays in the "
                      f"league)", file=console, flush=True)
        comm.Barrier()  # (the other ranks read the checkpoint rank 0 has just made)
        if job_run.preempted:
            return job_run
        resume = True


def _settle_a_stop(league: LeagueConfig, league_dir: Path, run_path: Path, budget: int,
                   console: IO[str] | None) -> None:
    """Before a policy resumes from a checkpoint that a stop signal wrote where its snapshot
    was due: publish that snapshot (:func:`~hpcrl.league.snapshot_hook.publish_missed`),
    and take the policy back to its initial weights when that snapshot draws a reset, as the
    run never stopped did there."""
    checkpoint = RunDir(run_path).checkpoint_path
    if not checkpoint.is_file():
        return  # (the resume itself says there is none)
    state = load_checkpoint(checkpoint)
    steps = int(state["counters"]["env_steps"])
    if not publish_missed(league_dir, league, steps, state.get("interval"), checkpoint):
        return
    if steps < budget and reset_drawn(league, steps):
        reset_checkpoint(checkpoint, initial_weights_path(run_path))
        if console is not None:
            print(f"hpcrl: {league.player} starts again from its initial weights after "
                  f"{steps:,} env steps (its snapshot, due where the run stopped, joined the "
                  f"league now)", file=console, flush=True)
