"""Learning curves from run directories: ``hpcrl plot DIR... -o curves.png``.

Runs that differ only in their seed form one curve: the mean episode return over the seeds,
on a common x grid (each seed's curve interpolated onto it, up to where the shortest seed
ends), with a band of one standard deviation. With ``scheme=True`` two more panels show where
each update's time went (collect, wait, compute, communicate, mean over the group's runs)
and the policy lag. matplotlib draws off-screen (``Agg``), so a headless node makes the file.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from hpcrl.runs_table import RunSummary, find_runs, group, summarize

X_AXES = {"env_steps": "env steps", "wall_time_s": "wall-clock seconds"}
TIME_COLUMNS = ("time_collect_s", "time_wait_s", "time_compute_s", "time_communicate_s")


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


def plot(paths: Iterable[str | Path], out: str | Path, x: str = "env_steps",
         scheme: bool = False) -> int:
    """Draw the curves of the runs at or below ``paths`` into ``out`` (PNG, PDF or SVG by
    its suffix); returns the number of curves drawn."""
    if x not in X_AXES:
        raise ValueError(f"x must be one of {sorted(X_AXES)}, got {x!r}")
    try:
        import matplotlib
    except ImportError:
        raise ImportError('hpcrl plot draws with matplotlib: pip install "hpcrl[plot]"') \
            from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = group([summarize(p) for p in find_runs(paths)])
    panels = 3 if scheme else 1
    fig, axes = plt.subplots(1, panels, figsize=(6.4 * panels, 4.2), squeeze=False)
    ax = axes[0][0]
    drawn = 0
    for name, runs in groups:
        grid, mean, std = curve(runs, x)
        if not grid.size:
            continue
        label = f"{name} ({len(runs)} seed{'s' if len(runs) > 1 else ''})"
        ax.plot(grid, mean, label=label)
        ax.fill_between(grid, mean - std, mean + std, alpha=0.25)
        drawn += 1
    ax.set_xlabel(X_AXES[x])
    ax.set_ylabel("episode return (mean over seeds)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    if scheme:
        _scheme_panels(axes[0][1], axes[0][2], groups)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return drawn


def _scheme_panels(time_ax, lag_ax, groups: list[tuple[str, list[RunSummary]]]) -> None:
    """Mean seconds per update in each phase (one bar group per curve) and policy lag."""
    width = 0.8 / max(len(groups), 1)
    for i, (name, runs) in enumerate(groups):
        means = [float(np.nanmean(np.concatenate([_column(r, c) for r in runs])))
                 for c in TIME_COLUMNS]
        time_ax.bar(np.arange(len(TIME_COLUMNS)) + i * width, means, width, label=name)
        lag = np.concatenate([_column(r, "policy_lag") for r in runs])
        steps = np.concatenate([_column(r, "env_steps") for r in runs])
        lag_ax.plot(steps, lag, ".", markersize=2, label=name)
    time_ax.set_xticks(np.arange(len(TIME_COLUMNS)) + width * (len(groups) - 1) / 2)
    time_ax.set_xticklabels([c[5:-2] for c in TIME_COLUMNS])
    time_ax.set_ylabel("seconds per update")
    time_ax.legend(fontsize=8)
    lag_ax.set_xlabel("env steps")
    lag_ax.set_ylabel("policy lag (updates)")
    lag_ax.grid(alpha=0.3)
