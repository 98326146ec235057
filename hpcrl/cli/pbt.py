"""``hpcrl pbt``: population-based training of one config, members as local processes (each
under ``mpiexec -n R`` when its scheme needs R ranks), as the ranks of one launch
(``mpiexec -n M``, ``srun -n M``: rank k supervises member k of one process,
:mod:`hpcrl.population.supervisor`), or one member (``--member K``: in this process, or on
all the ranks of this launch; what a Slurm array task and a local member run).

The population's settings are the config's ``pbt`` section (docs/pbt.md); its directory
holds each member's run and the members' exchange (:mod:`hpcrl.population.member_run`).
Locally, each member is its own ``hpcrl pbt --run-dir POP --member K`` process, run by the
:class:`~hpcrl.experiments.sweep_runner.LocalRunner` that runs a sweep's points (logs in
``POP/logs/``; a signal stops every member at a checkpoint, and the same command resumes
them). The members exchange only through ``POP/population/``: a member that fails leaves
the others training.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from hpcrl.cli.refusals import refusing
from hpcrl.sections.schema import Config

if TYPE_CHECKING:
    from hpcrl.experiments.sweep_runner import LocalJob

SET_HELP = "Override a config key, e.g. --set pbt.members=8 (repeatable)."


@click.command("pbt")
@click.argument("config", required=False, type=click.Path(dir_okay=False))
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help=SET_HELP)
@click.option("--run-dir", type=click.Path(file_okay=False),
              help="The population's directory (default: runs/pbt-<algo>-<env>-<time>); "
                   "given again, the population goes on.")
@click.option("--member", type=click.IntRange(min=0), default=None,
              help="Train only this member: in this process, or under mpiexec/srun on all "
                   "the ranks its scheme needs (what each local member and each Slurm array "
                   "task runs).")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None,
              help="Members trained at once on this machine (default: every member).")
@click.option("--restarts", type=click.IntRange(min=0), default=None,
              help="Under mpiexec or srun (rank k trains member k): how many times a rank "
                   "starts its member again from its checkpoint after it dies (default: 3).")
@refusing
def pbt_command(config: str | None, overrides: tuple[str, ...], run_dir: str | None,
                member: int | None, jobs: int | None, restarts: int | None) -> None:
    """Train a population of CONFIG's agent (pbt.members runs), each member copying a
    better one's state and mutating the keys of pbt.mutate every pbt.interval_env_steps.

    Given again with the same --run-dir, the population goes on: finished members are left
    as they are, the others resume from their checkpoints. Exits 1 when a member failed, 3
    when a signal stopped members that are left to resume.
    """
    from hpcrl.placement.launch import launched_size

    launched = launched_size() > 1
    if (member is not None or launched) and run_dir is None:
        raise click.UsageError("--member, or a launch of several ranks, trains members of "
                               "one population: give the population's --run-dir")
    supervising = launched and member is None
    if jobs is not None and (launched or member is not None):
        raise click.UsageError("--jobs says how many members hpcrl pbt starts at once on this "
                               "machine; under mpiexec/srun or with --member it starts none: "
                               "drop it")
    if restarts is not None and not supervising:
        raise click.UsageError("--restarts is for a launch of one rank a member (mpiexec -n M "
                               "hpcrl pbt, without --member): drop it here")
    root, chosen = chosen_population(config, overrides, run_dir)
    if member is not None:
        _train_one(chosen, root, member)
    elif launched:
        _train_as_rank(root, chosen, 3 if restarts is None else restarts)
    else:
        _train_all(root, chosen, jobs)


def chosen_population(config: str | None, overrides: tuple[str, ...], run_dir: str | None
                      ) -> tuple[Path, Config]:
    """The population's directory and config: CONFIG and --set on its first start (in
    --run-dir, or a new default directory), then the config it wrote, which CONFIG and
    --set, when given, must equal."""
    from hpcrl.config.loader import load_config
    from hpcrl.population.member_run import population_config

    root = Path(run_dir) if run_dir is not None else None
    given = config is not None or bool(overrides)
    wanted = load_config(config, overrides) if given or root is None else None
    if root is None:
        assert wanted is not None
        root = _default_root(wanted.algo.name, wanted.env.id)
    return root, population_config(root, wanted)


def _default_root(algo: str, env_id: str) -> Path:
    from hpcrl.runtime.run_dir import default_run_dir

    path = default_run_dir(algo, env_id)
    return path.with_name(f"pbt-{path.name}")


def _train_one(config: Config, root: Path, member: int) -> None:
    from hpcrl.comm.world import SelfComm, world_comm
    from hpcrl.errors import ConfigError
    from hpcrl.placement.launch import launched_rank, launched_size
    from hpcrl.population.member_run import train_member
    from hpcrl.runtime.signals import EXIT_ENV_FAILED, EXIT_PREEMPTED

    members = config.pbt.members
    if member >= members:
        raise ConfigError(f"--member {member}: the population has {members} members (0 to "
                          f"{members - 1})")
    world = SelfComm() if launched_size() == 1 else world_comm()  # (MPI's: the member's)
    job_run = train_member(config, root, member, console=sys.stderr, world=world)
    if job_run.preempted:
        if launched_rank() == 0:
            click.echo(f"hpcrl pbt: member {member} checkpointed and stopped; the same "
                       "command resumes it", err=True)
        sys.exit(EXIT_ENV_FAILED if job_run.env_failed else EXIT_PREEMPTED)


def _train_as_rank(root: Path, config: Config, restarts: int) -> None:
    """Under a launch of ``pbt.members`` ranks: supervise this rank's member (of one
    process)."""
    from hpcrl.errors import ConfigError
    from hpcrl.placement.launch import launched_rank, launched_size
    from hpcrl.population.supervisor import supervise
    from hpcrl.scheme.topology import required_world_size

    members = config.pbt.members

    size = launched_size()
    ranks = required_world_size(config.scheme)
    if ranks > 1:
        raise ConfigError(f"hpcrl pbt under a launch without --member trains one member of "
                          f"one process a rank, and this config's scheme needs {ranks} ranks a "
                          f"member: start each member's ranks with --member K (hpcrl pbt "
                          f"without mpiexec, and hpcrl slurm pbt, do), e.g. mpiexec -n {ranks} "
                          f"hpcrl pbt --run-dir {root} --member 0")
    if size != members:
        raise ConfigError(f"hpcrl pbt under a launch of {size} ranks trains one member a "
                          f"rank, and the population has {members}: launch {members} ranks "
                          f"(mpiexec -n {members}), or set pbt.members={size}")
    sys.exit(supervise(root, launched_rank(), restarts,
                       say=lambda text: click.echo(text, err=True)))


def _train_all(root: Path, config: Config, jobs: int | None) -> None:
    from hpcrl.experiments.sweep_runner import LocalRunner, exit_code
    from hpcrl.runtime.population_dir import PopulationDir
    from hpcrl.scheme.topology import required_world_size

    members = config.pbt.members
    todo = unfinished_members(root, members)
    parallel = jobs or members
    say = lambda text: click.echo(text, err=True)  # noqa: E731
    say(f"hpcrl pbt: {members} members in {root}: {members - len(todo)} finished, "
        f"{len(todo)} to train, {parallel} at a time")
    runner = LocalRunner("hpcrl pbt", PopulationDir(root).logs, parallel, say)
    outcomes = runner.run(member_jobs(root, todo, required_world_size(config.scheme)))
    click.echo(population_table(root, members))
    left = unfinished_members(root, members)
    code = exit_code(outcomes)
    if code == 0 and left:
        code = 3 if runner.stop_signal is not None else 1
    if code:
        say(f"hpcrl pbt: {len(left)} members left; go on with: hpcrl pbt --run-dir {root}")
        sys.exit(code)
    say(f"hpcrl pbt: every member finished; lineage in {PopulationDir(root).lineage_path}, "
        f"the members' runs with: hpcrl runs {root}, the values they trained with: hpcrl "
        f"plot {root}")



def unfinished_members(root: Path, members: int) -> list[int]:
    """The members of the population in ``root`` that have not finished training."""
    from hpcrl.runtime.population_dir import PopulationDir
    from hpcrl.runtime.run_dir import RunDir, is_finished

    population = PopulationDir(root)
    return [k for k in range(members) if not is_finished(RunDir(population.member(k)))]


def member_jobs(root: Path, members: list[int], ranks: int = 1) -> list[LocalJob]:
    """The local process of each of ``members`` (under ``mpiexec -n ranks`` for a member
    of several ranks)."""
    from hpcrl.experiments.sweep_runner import LocalJob, mpiexec_command
    from hpcrl.runtime.population_dir import PopulationDir
    from hpcrl.runtime.run_dir import RunDir

    launch = mpiexec_command(None, ranks) if ranks > 1 else []
    python = [*launch, sys.executable, "-m", "hpcrl.cli", "pbt"]
    population = PopulationDir(root)
    return [LocalJob(population.member(k).name,
                     [*python, "--run-dir", str(root), "--member", str(k)],
                     RunDir(population.member(k))) for k in members]


def _copies(root: Path) -> dict[int, int]:
    """How many times each member copied a leader (its lineage rows, one per key changed,
    counted once per copy)."""
    from hpcrl.population.lineage import Lineage
    from hpcrl.runtime.population_dir import PopulationDir

    lineage = Lineage(PopulationDir(root).exchange)
    copies = {(row.member, row.env_steps) for row in lineage.rows()}
    counts: dict[int, int] = {}
    for member, _ in copies:
        counts[member] = counts.get(member, 0) + 1
    return counts


def population_table(root: Path, members: int) -> str:
    """One line per member: its env steps and score at its latest interval, how often it
    copied a leader, and the values it trains with."""
    from hpcrl.population.workspace import Workspace
    from hpcrl.runtime.population_dir import PopulationDir

    workspace, copies = Workspace(PopulationDir(root).exchange), _copies(root)
    lines = [f"{'member':>8} {'env steps':>11} {'score':>9} {'copies':>6}  values"]
    for k in range(members):
        snapshot = workspace.read(k)
        if snapshot is None:
            lines.append(f"{k:>8} {'-':>11} {'-':>9} {copies.get(k, 0):>6}  (no interval yet)")
            continue
        values = ", ".join(f"{key}={v:.4g}" for key, v in sorted(snapshot.hyperparameters.items()))
        lines.append(f"{k:>8} {snapshot.env_steps:>11,} {snapshot.score:>9.2f} "
                     f"{copies.get(k, 0):>6}  {values}")
    return "\n".join(lines)
