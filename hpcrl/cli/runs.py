"""``hpcrl runs`` and ``hpcrl plot``: what a set of runs did, as a table and as curves."""
from __future__ import annotations

import csv
import json
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
import yaml

from hpcrl.cli.refusals import refusing
from hpcrl.cli.text_table import ELLIPSIS, fit, render
from hpcrl.experiments.runs_table import (
    RunSummary,
    differences,
    find_runs,
    flat_config,
    group,
    mean_std,
    summarize,
    telling_keys,
)

MIN_RUN_WIDTH = 20  # a run directory is cut in its middle to this before a telling key goes

PATHS = click.argument("paths", nargs=-1, required=True,
                       type=click.Path(exists=True, file_okay=False))


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _record(run: RunSummary, keys: list[str], name: str) -> dict[str, Any]:
    """One run as the JSON and CSV outputs give it."""
    flat = flat_config(run.config)
    return {"run_dir": str(run.path), "group": name, "seed": run.seed,
            **{k: flat.get(k) for k in keys},
            "env_steps": run.env_steps, "total_env_steps": run.total_env_steps,
            "wall_time_s": round(run.wall_time_s, 1), "last_return": run.last_return,
            "eval_return": run.eval_return, "best_eval_return": run.best_eval_return,
            "state": run.state}


@click.command("runs")
@PATHS
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of runs (for scripts).")
@click.option("--csv", "as_csv", is_flag=True, help="Print CSV, one row per run.")
@click.option("--wide", is_flag=True,
              help="Every key in which the runs differ, however long the lines.")
@refusing
def runs_command(paths: tuple[str, ...], as_json: bool, as_csv: bool, wide: bool) -> None:
    """One line per run found at or below PATHS (run or sweep directories): the config keys
    in which the runs differ, env steps, wall time, the last mean episode return, the final
    deterministic evaluation (and the best one during training, with train.eval_every) and
    the state (running, finished, preempted, failed); then, for a population's directory
    (hpcrl pbt), each member's newest interval, copies and values; then, for runs that
    differ only in their seed, the mean and std over seeds.

    The lines fit the terminal (COLUMNS): the keys that tell the runs apart come first (env,
    algorithm, scheme, then hyperparameters), and the keys that do not fit are counted and
    named below the table; --wide shows them all, --json gives every run's values."""
    runs = [summarize(p) for p in find_runs(paths)]
    telling = telling_keys(runs)
    keys = telling + [k for k in differences(runs) if k not in telling]
    groups = group(runs)
    records = [_record(r, keys, name) for name, members in groups for r in members]
    if as_json:
        click.echo(json.dumps(records, indent=1))
        return
    if as_csv:
        writer = csv.DictWriter(sys.stdout, fieldnames=list(records[0]))
        writer.writeheader()
        writer.writerows(records)
        return
    width = None if wide else shutil.get_terminal_size().columns
    best = any(r.best_eval_return is not None for r in runs)  # a column when eval_every ran
    header = ["run", *keys, "steps", "wall s", "return", "eval", *(["best"] if best else []),
              "state"]
    lines = [[str(r.path), *[str(rec[k]) for k in keys], f"{r.env_steps:,}",
              _fmt(r.wall_time_s, 0), _fmt(r.last_return), _fmt(r.eval_return),
              *([_fmt(r.best_eval_return)] if best else []), r.state]
             for r, rec in zip([r for _, m in groups for r in m], records, strict=True)]
    columns = range(1, len(keys) + 1)  # the key columns, telling keys first
    shown, left_out = _fitted(header, lines, width, drop=columns[len(telling):][::-1],
                              then_drop=[header.index("wall s"), *columns[:len(telling)][::-1]])
    click.echo("\n".join(shown))
    hidden = sorted(c for c in left_out if c in columns)
    if hidden:
        names = ", ".join(keys[c - 1] for c in hidden)
        note = (f"{len(hidden)} differing key{'s' if len(hidden) > 1 else ''} not shown "
                f"(--wide or --json): {names}")
        click.echo(note if width is None or len(note) <= width
                   else note[:width - len(ELLIPSIS)] + ELLIPSIS)
    _populations(paths)
    seeded = [(name, members) for name, members in groups if len(members) > 1]
    if seeded:
        click.echo("")
        rows = []
        for name, members in seeded:
            last, last_sd = mean_std([r.last_return for r in members])
            ev, ev_sd = mean_std([r.eval_return for r in members])
            states = ", ".join(sorted({r.state for r in members}))
            rows.append([name, str(len(members)), f"{_fmt(last)} +- {_fmt(last_sd)}",
                         f"{_fmt(ev)} +- {_fmt(ev_sd)}", states])
        click.echo("\n".join(_fitted(["group", "seeds", "return", "eval", "states"], rows,
                                     width)[0]))


def _populations(paths: Sequence[str]) -> None:
    """Below the runs of a population's directory (hpcrl pbt): where each member stands at
    its newest interval, how often it copied a leader, and the values it trains with."""
    from hpcrl.cli.pbt import population_table
    from hpcrl.experiments.schedules import populations

    for population in populations(list(paths)):
        config = yaml.safe_load(population.config_path.read_text()) or {}
        members = int((config.get("pbt") or {}).get("members", 0))
        click.echo(f"\npopulation {population.path} (lineage: {population.lineage_path}):")
        click.echo(population_table(population.path, members))


def _fitted(header: list[str], rows: list[list[str]], width: int | None,
            drop: Sequence[int] = (), then_drop: Sequence[int] = ()
            ) -> tuple[list[str], list[int]]:
    """The table's lines no longer than ``width`` (all of it when None) and the columns left
    out: those of ``drop`` first, then the first column (the run, or the group) is cut in its
    middle, then those of ``then_drop`` go."""
    if width is None:
        return render(header, rows), []
    return fit(header, rows, width, drop, shrink=0, min_shrink=MIN_RUN_WIDTH,
               then_drop=then_drop)


@click.command("plot")
@PATHS
@click.option("-o", "--output", default="curves.png", show_default=True,
              type=click.Path(dir_okay=False), help="The image to write (.png, .pdf, .svg).")
@click.option("--x", "x_axis", type=click.Choice(["env_steps", "wall_time_s"]),
              default="env_steps", show_default=True, help="What the x axis shows.")
@click.option("--scheme", is_flag=True,
              help="Also the time split per update and the policy lag.")
@refusing
def plot_command(paths: tuple[str, ...], output: str, x_axis: str, scheme: bool) -> None:
    """Learning curves of the runs at or below PATHS: mean episode return over seeds with a
    band of one std, one curve per config, and the evaluations during training beside them
    (needs matplotlib: pip install "hpcrl[plot]"). A population's directory (hpcrl pbt) also
    gets OUTPUT-schedules: each mutated key's values per member over env steps; a self-play
    run OUTPUT-league: its rating over its matches and the league's size."""
    from hpcrl.experiments.league_plot import draw_league, league_runs
    from hpcrl.experiments.plots import plot
    from hpcrl.experiments.schedules import draw_schedules, populations

    drawn = plot(paths, output, x_axis, scheme)
    click.echo(f"{output}: {drawn} curve{'s' if drawn != 1 else ''}")
    for i, run in enumerate(league_runs(paths)):  # self-play: the rating and the league
        target = Path(output)
        which = f"-{i}" if i else ""
        image = target.with_name(f"{target.stem}-league{which}{target.suffix}")
        draw_league(run).savefig(image)
        click.echo(f"{image}: the league of {run}")
    found = populations(list(paths))
    for i, population in enumerate(found):  # hpcrl pbt: the values each member trained with
        target = Path(output)
        which = f"-{i}" if len(found) > 1 else ""
        image = target.with_name(f"{target.stem}-schedules{which}{target.suffix}")
        draw_schedules(population).savefig(image)
        click.echo(f"{image}: the schedules of {population.path}")
