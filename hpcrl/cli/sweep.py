"""``hpcrl sweep``: seeds and a grid of one config, trained on this machine."""
from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from hpcrl.cli.refusals import refusing

SET_HELP = "Override a config key in every point, e.g. --set algo.lr=3e-4 (repeatable)."
SWEEP_DIR_HELP = ("The sweep directory, one run directory per point below it (default: "
                  "runs/sweep-<time>).")


def sweep_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options ``hpcrl sweep`` and ``hpcrl slurm sweep`` share."""
    options = [
        click.option("--seeds", metavar="SEEDS", help="Seeds of every grid point: a range "
                     "(0-4), a list (0,3,7) or both (0-2,10); default: the config's seed."),
        click.option("--grid", "grid", multiple=True, metavar="KEY=V1,V2,...",
                     help="A config key and the values it takes; each --grid multiplies the "
                     "points (repeatable; commas inside [...] stay in the value)."),
        click.option("--resume", "resume_dir", type=click.Path(file_okay=False, exists=True),
                     help="Go on with the sweep in this directory, as its sweep.yaml "
                     "records it (no CONFIG, --grid, --seeds or --set)."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def default_sweep_dir() -> Path:
    """``runs/sweep-<date>-<time>``, unique."""
    base = Path("runs") / f"sweep-{time.strftime('%Y%m%d-%H%M%S')}"
    path, n = base, 1
    while path.exists():
        path, n = base.with_name(f"{base.name}-{n}"), n + 1
    return path


def load_sweep(config: str | None, sets: tuple[str, ...], grid: tuple[str, ...],
               seeds: str | None, run_dir: str | None, resume_dir: str | None) -> Any:
    """The sweep to run: the one in ``--resume``'s directory, or the one the options
    describe (started, or continued when ``--run-dir`` holds the same sweep)."""
    from hpcrl.experiments.sweep import new_sweep, resume_sweep, start_sweep

    if resume_dir is not None:
        if config or sets or grid or seeds or run_dir:
            raise click.UsageError("--resume takes the config, grid, seeds and overrides "
                                   "recorded in the sweep's sweep.yaml; drop CONFIG, --grid, "
                                   "--seeds, --set and --run-dir")
        return resume_sweep(Path(resume_dir))
    path = Path(run_dir) if run_dir else default_sweep_dir()
    return start_sweep(new_sweep(path, config, sets, grid, seeds))


@click.command("sweep")
@click.argument("config", required=False, type=click.Path(dir_okay=False, exists=True))
@sweep_options
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help=SET_HELP)
@click.option("--run-dir", type=click.Path(file_okay=False), help=SWEEP_DIR_HELP)
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None,
              help="Points trained at the same time (default: 1, or what the sweep's "
                   "sweep.yaml recorded when it goes on).")
@click.option("--launch", metavar="COMMAND", help="How a point with N ranks starts: e.g. "
              "'mpirun --oversubscribe' (-n N is added; default: the mpiexec beside this "
              "Python, or what the sweep's sweep.yaml recorded when it goes on).")
@refusing
def sweep_command(config: str | None, seeds: str | None, grid: tuple[str, ...],
                  resume_dir: str | None, sets: tuple[str, ...], run_dir: str | None,
                  jobs: int | None, launch: str | None) -> None:
    """Train CONFIG (default: the embedded one) over --seeds and a --grid of values, each
    point in its own run directory under the sweep directory, JOBS at a time.

    Given again (or with --resume DIR), a sweep goes on: finished points are left as they
    are, points with a checkpoint resume, the others start. Exits 1 when a point failed,
    3 when a signal stopped it with points left to resume.
    """
    from hpcrl.experiments.sweep_runner import SweepRunner, exit_code
    from hpcrl.placement.launch import launched_size

    if launched_size() > 1:
        raise click.UsageError("hpcrl sweep starts each point's ranks itself: run it without "
                               "mpiexec/srun, and give --launch 'mpirun ...' if the points "
                               "need another launcher")
    sweep = load_sweep(config, sets, grid, seeds, run_dir, resume_dir)
    sweep.train_here(jobs, launch)
    runner = SweepRunner(sweep, sweep.jobs, sweep.launch,
                         say=lambda text: click.echo(text, err=True))
    outcomes = runner.run_sweep()
    left = sweep.unfinished()
    click.echo(f"hpcrl sweep: {len(sweep.points) - len(left)} of {len(sweep.points)} points "
               f"finished in {sweep.path}; see them with: hpcrl runs {sweep.path}", err=True)
    code = exit_code(outcomes)
    if code == 0 and left:
        code = 3 if runner.stop_signal is not None else 1
    if code:
        again = f"hpcrl sweep --resume {sweep.path}"
        click.echo(f"hpcrl sweep: {len(left)} points left; go on with: {again}", err=True)
        sys.exit(code)
