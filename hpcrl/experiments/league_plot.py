"""``hpcrl plot`` of a self-play run: the trained policy's rating over its matches and the
league's size over env steps, read from the run's match log and snapshots."""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from hpcrl.league.match_log import match_dir, read_matches
from hpcrl.league.ratings import rate
from hpcrl.league.snapshots import PLAYER, snapshots

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def league_runs(paths: Iterable[str | Path]) -> list[Path]:
    """The self-play runs (a ``league/matches`` folder) at or below ``paths``."""
    found: list[Path] = []
    for path in map(Path, paths):
        candidates = [path] if match_dir(path / "league").is_dir() else []
        if path.is_dir() and not candidates:
            candidates = sorted(p.parent.parent for p in path.glob("**/league/matches"))
        found += [run for run in candidates if run not in found]
    return found


def draw_league(run: Path) -> Figure:
    """Two panels: the trained policy's rating (the run's ``env.league.ratings``) after each
    of its matches, and the number of snapshots in the league over env steps."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    config = yaml.safe_load((run / "config.yaml").read_text()) or {}
    system = ((config.get("env") or {}).get("league") or {}).get("ratings", "elo")
    league = run / "league"
    ratings = rate(read_matches(league), system)
    fig = Figure(figsize=(10.0, 3.2), dpi=120, layout="constrained")
    FigureCanvasAgg(fig)
    rating_ax, size_ax = fig.subplots(1, 2)
    curve = ratings.curves.get(PLAYER, [])
    rating_ax.plot(range(1, len(curve) + 1), [point.rating for point in curve], color="C0")
    rating_ax.set(xlabel="matches played", ylabel=f"{PLAYER}'s rating ({system})",
                  title=str(run))
    steps = [snap.env_steps for snap in snapshots(league)]
    size_ax.step([0, *steps], range(len(steps) + 1), where="post", color="C1")
    size_ax.set(xlabel="env steps", ylabel="snapshots in the league")
    return fig
