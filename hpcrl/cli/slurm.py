"""``hpcrl slurm render|submit``: batch scripts sized from a config's rank table."""
from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from hpcrl.cli.refusals import refusing
from hpcrl.cli.sweep import SWEEP_DIR_HELP, sweep_options

SET_HELP = "Override a config key, e.g. --set algo.lr=3e-4 (repeatable)."


RUN_DIR_HELP = "Run directory (default: runs/<job name>-<job id>)."


def _render_options(command: Callable[..., Any],
                    run_dir_help: str = RUN_DIR_HELP) -> Callable[..., Any]:
    """The options render, submit and sweep share (each None keeps the template's value);
    ``run_dir_help`` says what ``--run-dir`` is for the command."""
    options = [
        click.argument("template", metavar="TEMPLATE"),
        click.argument("config", required=False, type=click.Path(dir_okay=False, exists=True)),
        click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help=SET_HELP),
        click.option("--nodes", type=click.IntRange(min=1), help="Nodes of GPU tasks."),
        click.option("--gpus-per-node", type=click.IntRange(min=1),
                     help="GPUs per node, one task each."),
        click.option("--time", "time_minutes", type=click.IntRange(min=1), metavar="MINUTES",
                     help="Time limit of each run of the job."),
        click.option("--signal-lead", "signal_lead_s", type=click.IntRange(min=1),
                     metavar="SECONDS", help="Send the warning signal (USR1) this long "
                     "before the time limit."),
        click.option("--run-dir", type=click.Path(file_okay=False), help=run_dir_help),
        click.option("--log", metavar="PATTERN", help="Slurm log file (sbatch --output; "
                     "%j is the job id)."),
        click.option("--partition", help="Slurm partition of the job."),
        click.option("--collector-partition",
                     help="async: partition of the CPU collector component."),
        click.option("--account", help="Slurm account to charge."),
        click.option("--qos", help="Slurm quality of service."),
        click.option("--launch", metavar="COMMAND", help="How ranks start: 'srun', "
                     "'srun --mpi=pmix', 'srun --mpi=pmi2', 'mpirun ...' (default: srun with "
                     "the plugin of the MPI library mpi4py runs on; for the async template on "
                     "Open MPI 5, 'mpiexec --with-ft ulfm', which survives a lost collector)."),
        click.option("--job-name", help="Slurm job name."),
        click.option("--cpus-per-task", type=click.IntRange(min=1),
                     help="CPUs of every task (default: from the config)."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _options(**kwargs: Any) -> Any:
    from hpcrl.slurm.render import RenderOptions

    kwargs["sets"] = tuple(kwargs["sets"])
    return RenderOptions(**kwargs)


def _report(rendered: Any) -> None:
    """The warnings, the job's summary and its launcher, on stderr."""
    for text in rendered.warnings:
        click.echo(f"hpcrl: warning: {text}", err=True)
    click.echo(rendered.shape.summary(), err=True)
    click.echo(rendered.launch_note, err=True)


@click.group("slurm")
def slurm() -> None:
    """Slurm batch scripts from the templates sync, async and central."""


@slurm.command("render")
@_render_options
@click.option("-o", "--output", "output", type=click.Path(dir_okay=False),
              help="Write the script here (default: stdout).")
@refusing
def render_command(output: str | None, **kwargs: Any) -> None:
    """Fill TEMPLATE (sync, async, central or a template file) from CONFIG.

    Task counts, GPUs and CPUs come from the scheme's rank table (as in `hpcrl plan`):
    sync and central run one task per GPU, async one learner task per GPU plus the
    collector tasks of its scheme.
    """
    from hpcrl.slurm.render import render

    rendered = render(_options(**kwargs))
    _report(rendered)
    if output is None:
        click.echo(rendered.text, nl=False)
    else:
        Path(output).write_text(rendered.text)
        click.echo(f"hpcrl: wrote {output}; submit it with: sbatch {output}", err=True)


@slurm.command("submit")
@_render_options
@refusing
def submit_command(**kwargs: Any) -> None:
    """Render TEMPLATE like `render` and submit it with sbatch; prints the job id.

    With --run-dir the script (job.sbatch) and the Slurm log go into the run directory.
    """
    from hpcrl.slurm.submit import submit

    done = submit(_options(**kwargs))
    _report(done.rendered)
    where = f" (script {done.script})" if done.script else ""
    click.echo(f"hpcrl: submitted job {done.job_id}{where}", err=True)
    click.echo(done.job_id)



@slurm.command("sweep")
@functools.partial(_render_options, run_dir_help=SWEEP_DIR_HELP)
@sweep_options
@click.option("--max-running", type=click.IntRange(min=1), metavar="M",
              help="At most M array tasks run at once (sbatch --array=...%M).")
@click.option("--submit", "submit_now", is_flag=True,
              help="Also submit the script with sbatch (prints the array's job id).")
@refusing
def sweep_command(seeds: str | None, grid: tuple[str, ...], resume_dir: str | None,
                  max_running: int | None, submit_now: bool, **kwargs: Any) -> None:
    """Render TEMPLATE as one Slurm job array over --seeds and a --grid of CONFIG's values:
    a task per point, each training in its own run directory under the sweep directory
    (--run-dir, default runs/sweep-<time>), with the template's preemption and requeue.

    The script is written to the sweep directory as sweep.sbatch (submit it with sbatch,
    or give --submit). Given again (or with --resume DIR), the array covers the points that
    have not finished; those with a checkpoint resume.
    """
    from hpcrl.cli.sweep import load_sweep
    from hpcrl.slurm.submit import find_sbatch
    from hpcrl.slurm.sweep import render_sweep, write_sweep_script

    sbatch = find_sbatch() if submit_now else None
    sweep = load_sweep(kwargs["config"], tuple(kwargs["sets"]), grid, seeds,
                       kwargs["run_dir"], resume_dir)
    rendered = render_sweep(_options(**kwargs), sweep, max_running)
    script = write_sweep_script(rendered, sweep)
    _hand_over(rendered, script, sbatch, f"{len(sweep.unfinished())} array tasks of "
               f"{len(sweep.points)} points", f"the points with: hpcrl runs {sweep.path}")


def _hand_over(rendered: Any, script: Path, sbatch: str | None, tasks: str, see: str) -> None:
    """Say what an array script holds (``tasks``), then submit it when ``sbatch`` is given
    (printing the array's job id, and how to ``see`` its runs), else say how to."""
    from hpcrl.slurm.submit import run_sbatch

    _report(rendered)
    click.echo(f"hpcrl: wrote {script}: {tasks}", err=True)
    if sbatch is None:
        click.echo(f"hpcrl: submit it with: sbatch {script}", err=True)
        return
    job_id = run_sbatch(sbatch, script)
    click.echo(f"hpcrl: submitted job array {job_id}; see {see}", err=True)
    click.echo(job_id)


POP_DIR_HELP = ("The population's directory (default: runs/pbt-<algo>-<env>-<time>); given "
                "again, the array covers the members that have not finished.")


@slurm.command("pbt")
@functools.partial(_render_options, run_dir_help=POP_DIR_HELP)
@click.option("--max-running", type=click.IntRange(min=1), metavar="M",
              help="At most M members train at once (sbatch --array=...%M).")
@click.option("--submit", "submit_now", is_flag=True,
              help="Also submit the script with sbatch (prints the array's job id).")
@refusing
def pbt_command(max_running: int | None, submit_now: bool, **kwargs: Any) -> None:
    """Render TEMPLATE as one Slurm job array over a population of CONFIG (pbt.members
    members, `hpcrl pbt`): a task per member, each training its own run directory under the
    population's directory, with the template's preemption and requeue.

    The script is written to the population's directory as pbt.sbatch (submit it with
    sbatch, or give --submit). Given again, the array covers the members that have not
    finished; those with a checkpoint resume.
    """
    from hpcrl.cli.pbt import chosen_population, unfinished_members
    from hpcrl.runtime.population_dir import PopulationDir
    from hpcrl.slurm.population_array import render_population, write_population_script
    from hpcrl.slurm.submit import find_sbatch

    sbatch = find_sbatch() if submit_now else None
    root, config = chosen_population(kwargs["config"], tuple(kwargs["sets"]),
                                     kwargs["run_dir"])
    members = config.pbt.members
    todo = unfinished_members(root, members)
    if not todo:
        raise click.UsageError(f"every member of the population in {root} has finished; see "
                               f"them with: hpcrl runs {root}")
    kwargs["run_dir"] = None
    rendered = render_population(_options(**kwargs), PopulationDir(root), members, todo,
                                 max_running)
    script = write_population_script(rendered, PopulationDir(root))
    _hand_over(rendered, script, sbatch, f"{len(todo)} array tasks of {members} members",
               f"the members with: hpcrl runs {root}")


@slurm.command("launcher")
@click.option("--template", "kind", type=click.Choice(["sync", "async", "central"]),
              default="sync", show_default=True,
              help="The template whose ranks start: on Open MPI 5 the async template's start "
                   "under `mpiexec --with-ft ulfm`, so that its job survives a lost collector.")
def launcher_command(kind: str) -> None:
    """Print the command that starts a template's ranks as one MPI world.

    `srun --mpi=pmi2` for MPICH and its derivatives, `srun --mpi=pmix` for Open MPI, read
    from the MPI library mpi4py runs on; for the async template on Open MPI 5, Open MPI's
    `mpiexec --with-ft ulfm`; plain `srun` (the site's MpiDefault) with a warning when the
    library cannot be told. The templates ask it when HPCRL_LAUNCH is empty.
    """
    from hpcrl.slurm.mpi_plugin import template_launch

    choice = template_launch(kind)
    if choice.plugin is None:
        click.echo(f"hpcrl: warning: {choice.reason}; set HPCRL_LAUNCH (e.g. 'srun "
                   f"--mpi=pmix' for Open MPI, 'srun --mpi=pmi2' for MPICH) if the ranks "
                   f"end up alone in worlds of size 1", err=True)
    else:
        click.echo(f"hpcrl: {choice.command}: {choice.reason}", err=True)
    click.echo(choice.command)
