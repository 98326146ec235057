"""Learning curves from run directories: ``hpcrl plot DIR... -o curves.png``.

One row of panels per env (``env.id``): the returns of CartPole, Pendulum and Pong share no
scale, so each env has its own y axis. In a row, runs that differ only in their seed form
one curve: the mean episode return over the seeds, on a common x grid (each seed's curve
interpolated onto it, up to where the shortest seed ends), with a band of one standard
deviation. A curve is labelled by the few keys that tell that env's groups apart
(:func:`hpcrl.experiments.runs_table.telling_keys`), and the row's legend stands right of
its panels, outside the axes; the figure is made wide and tall enough to hold it. With
``scheme=True`` two more panels in each row show where each update's time went (collect,
wait, compute, communicate, mean over the group's runs) and the policy lag, in the colours
of the curves.
matplotlib draws off-screen (the Agg canvas, no pyplot), so a headless node makes the file.
"""
from __future__ import annotations

import csv
import textwrap
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hpcrl.errors import ExplainedError
from hpcrl.experiments.runs_table import RunSummary, find_runs, group, summarize

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.legend import Legend

X_AXES = {"env_steps": "env steps", "wall_time_s": "wall-clock seconds"}
TIME_COLUMNS = ("time_collect_s", "time_wait_s", "time_compute_s", "time_communicate_s")
PANEL_INCHES = (5.0, 3.2)  # width and height of one panel
DPI = 120
LABEL_CHARS = 44  # a longer legend label wraps between its keys
DASHES = ("-", "--", ":", "-.")  # past the 10 colours, the 11th group's curve is dashed, ...


class PlotError(ExplainedError, ImportError):
    """A plot that cannot be drawn here (matplotlib missing); the message says the install."""


def _column(run: RunSummary, name: str) -> np.ndarray:
    return np.array([float(r.get(name) or "nan") for r in run.rows], dtype=np.float64)


def curve(runs: Sequence[RunSummary], x: str, points: int = 200
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The group's x grid, mean return and std over its runs (NaN rows left out)."""
    series = []
    for run in runs:
        xs, ys = _column(run, x), _column(run, "episode_return_mean")
        keep = np.isfinite(xs) & np.isfinite(ys)
        if keep.sum() >= 1:
            series.append((xs[keep], ys[keep]))
    if not series:
        return np.array([]), np.array([]), np.array([])
    end = min(xs[-1] for xs, _ in series)
    start = max(xs[0] for xs, _ in series)
    grid = np.linspace(start, end, points) if end > start else np.array([end])
    values = np.stack([np.interp(grid, xs, ys) for xs, ys in series])
    return grid, values.mean(axis=0), values.std(axis=0)


def _eval_series(run: RunSummary, x: str) -> tuple[np.ndarray, np.ndarray] | None:
    """The run's evaluations during training (``eval.csv``: ``x`` and the mean return of
    each row), or None when it has none."""
    try:
        with open(run.path / "eval.csv", newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError:
        return None
    xs = np.array([float(r.get(x) or "nan") for r in rows], dtype=np.float64)
    ys = np.array([float(r.get("mean_return") or "nan") for r in rows], dtype=np.float64)
    keep = np.isfinite(xs) & np.isfinite(ys)
    return (xs[keep], ys[keep]) if keep.any() else None


def eval_curve(runs: Sequence[RunSummary], x: str) -> tuple[np.ndarray, np.ndarray]:
    """The group's evaluations during training: the mean return over its runs at the x of
    the first run's evaluations (each run's interpolated there, up to where the shortest
    ends); empty when no run evaluates."""
    series = [s for s in (_eval_series(run, x) for run in runs) if s is not None]
    if not series:
        return np.array([]), np.array([])
    end = min(xs[-1] for xs, _ in series)
    grid = series[0][0][series[0][0] <= end]
    return grid, np.stack([np.interp(grid, xs, ys) for xs, ys in series]).mean(axis=0)


def by_env(runs: Iterable[RunSummary]) -> list[tuple[str, list[RunSummary]]]:
    """The runs split by their ``env.id``, envs in alphabetical order: one row of panels
    each."""
    envs: dict[str, list[RunSummary]] = {}
    for run in runs:
        envs.setdefault(str((run.config.get("env") or {}).get("id", "?")), []).append(run)
    return sorted(envs.items())


def label(name: str, runs: Sequence[RunSummary], alone: bool) -> str:
    """A curve's legend entry: its group's name (none when it is the ``alone`` group of its
    env) and its seeds, wrapped between keys when long."""
    seeds = sorted({r.seed for r in runs})
    which = f"seed {seeds[0]}" if len(seeds) == 1 else f"{len(seeds)} seeds"
    return which if alone else textwrap.fill(f"{name}, {which}", LABEL_CHARS)


def style(i: int) -> dict[str, Any]:
    """The colour and dashes of group ``i``'s curve: ten colours, then the same ten
    dashed, dotted, ..."""
    return {"color": f"C{i % 10}", "linestyle": DASHES[i // 10 % len(DASHES)]}


def figure(paths: Iterable[str | Path], x: str = "env_steps", scheme: bool = False
           ) -> tuple[Figure, int]:
    """The figure of the runs at or below ``paths``, sized and laid out as it is saved, and
    the number of curves drawn."""
    if x not in X_AXES:
        raise ValueError(f"x must be one of {sorted(X_AXES)}, got {x!r}")
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise PlotError('hpcrl plot draws with matplotlib: pip install "hpcrl[plot]"') \
            from None
    envs = by_env(summarize(p) for p in find_runs(paths))
    columns = 3 if scheme else 1
    fig = Figure(dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(envs), columns, squeeze=False)
    drawn, legends = 0, []
    for row, (env_id, runs) in zip(axes, envs, strict=True):
        groups = group(runs)
        drawn += _curves(row[0], groups, x)
        row[0].set_title(f"{env_id} ({len(runs)} run{'s' if len(runs) > 1 else ''})",
                         fontsize=10)
        if scheme:
            _scheme_panels(row[1], row[2], groups)
        legends.append(row[-1].legend(*row[0].get_legend_handles_labels(), fontsize=8,
                                      loc="upper left", bbox_to_anchor=(1.03, 1.0),
                                      borderaxespad=0.0))
    _size_for(fig, legends, columns)
    return fig, drawn


def plot(paths: Iterable[str | Path], out: str | Path, x: str = "env_steps",
         scheme: bool = False) -> int:
    """Draw the curves of the runs at or below ``paths`` into ``out`` (PNG, PDF or SVG by
    its suffix); returns the number of curves drawn."""
    fig, drawn = figure(paths, x, scheme)
    fig.savefig(out)
    return drawn


def _curves(ax: Axes, groups: list[tuple[str, list[RunSummary]]], x: str) -> int:
    """One env's curves, in the :func:`style` of each group; a group with no finished
    episode yet keeps its legend entry, saying so."""
    drawn = 0
    for i, (name, runs) in enumerate(groups):
        text = label(name, runs, alone=len(groups) == 1)
        grid, mean, std = curve(runs, x)
        if not grid.size:
            ax.plot([], [], **style(i), label=f"{text} (no episode finished)")
            continue
        ax.plot(grid, mean, **style(i), label=text, marker="." if grid.size == 1 else None)
        ax.fill_between(grid, mean - std, mean + std, color=style(i)["color"], alpha=0.25)
        drawn += 1
        at, evaluated = eval_curve(runs, x)
        if at.size:  # beside the training curve: the deterministic evaluations
            ax.plot(at, evaluated, color=style(i)["color"], linestyle=":", marker="o",
                    markersize=3, label=textwrap.fill(f"{text}, evaluation", LABEL_CHARS))
    if not drawn:
        ax.text(0.5, 0.5, "no episode has finished yet", ha="center", va="center",
                transform=ax.transAxes, color="0.4")
    ax.set_xlabel(X_AXES[x])
    ax.set_ylabel("episode return")
    ax.grid(alpha=0.3)
    return drawn


def _size_for(fig: Figure, legends: list[Legend], columns: int) -> None:
    """Make the figure the panels' size plus room for the widest legend beside them, each
    row at least as tall as its legend (and title and axis labels), so constrained layout
    never has to squeeze."""
    # the figure draws on Agg, whose canvas has get_renderer (matplotlib's stub types the
    # base canvas, which lacks it)
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    boxes = [legend.get_window_extent(renderer) for legend in legends]
    legend_w = max(b.width for b in boxes) / fig.dpi
    heights = [max(PANEL_INCHES[1], b.height / fig.dpi + 1.0) for b in boxes]
    grid = fig.axes[0].get_gridspec()
    assert grid is not None  # the panels come from one subplots() grid
    grid.set_height_ratios(heights)
    fig.set_size_inches(PANEL_INCHES[0] * columns + legend_w + 0.4, sum(heights))


def _finite_mean(values: np.ndarray) -> float:
    finite = values[np.isfinite(values)]
    return float(finite.mean()) if finite.size else float("nan")


def _scheme_panels(time_ax: Axes, lag_ax: Axes,
                   groups: list[tuple[str, list[RunSummary]]]) -> None:
    """Mean seconds per update in each phase (one bar per group) and the policy lag, in the
    groups' colours; a phase a scheme does not have (no wait in a serial run) has no bar."""
    width = 0.8 / max(len(groups), 1)
    for i, (_, runs) in enumerate(groups):
        means = [_finite_mean(np.concatenate([_column(r, c) for r in runs]))
                 for c in TIME_COLUMNS]
        time_ax.bar(np.arange(len(TIME_COLUMNS)) + i * width, means, width,
                    color=style(i)["color"], hatch=("", "//", "..", "xx")[i // 10 % 4])
        lag = np.concatenate([_column(r, "policy_lag") for r in runs])
        steps = np.concatenate([_column(r, "env_steps") for r in runs])
        lag_ax.plot(steps, lag, ".", markersize=2, color=style(i)["color"])
    time_ax.set_xticks(np.arange(len(TIME_COLUMNS)) + width * (len(groups) - 1) / 2)
    time_ax.set_xticklabels([c[5:-2] for c in TIME_COLUMNS])
    time_ax.set_ylabel("seconds per update")
    lag_ax.set_xlabel("env steps")
    lag_ax.set_ylabel("policy lag (updates)")
    lag_ax.grid(alpha=0.3)
