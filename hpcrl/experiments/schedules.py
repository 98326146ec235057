"""The schedules a population's members trained with: ``hpcrl plot POP`` draws them beside
the learning curves, one panel per key of ``pbt.mutate``, a step line per member.

A member's value of a key starts at the value it drew (the ``old`` value of its first copy in
``population/lineage.csv``, or, when it never copied, the value its ``config.yaml`` holds),
changes at each of its copies to the copy's ``new`` value, and holds to where the member's
training got (its last progress row). The lineage is the population's one record of the
copies (:mod:`hpcrl.population.lineage` writes it); this module reads it as CSV.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from hpcrl.runtime.population_dir import PopulationDir

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["Schedule", "draw_schedules", "populations", "schedules"]


@dataclass
class Schedule:
    """One member's values of one key: ``values[i]`` from ``env_steps[i]`` on."""

    member: int
    env_steps: list[float] = field(default_factory=list)
    values: list[float] = field(default_factory=list)


def populations(paths: list[str | Path]) -> list[PopulationDir]:
    """The populations among ``paths`` (a directory holding ``pbt-config.yaml``)."""
    found = (PopulationDir(Path(p)) for p in paths)
    return [population for population in found if population.is_population()]


def _lookup(data: dict[str, Any], key: str) -> float | None:
    value: Any = data
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return float(value)


def _last_env_steps(run: Path) -> float:
    try:
        with open(run / "progress.csv", newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError:
        return 0.0
    return float(rows[-1]["env_steps"]) if rows else 0.0


def schedules(population: PopulationDir) -> dict[str, list[Schedule]]:
    """Every mutated key's schedule of every member that has started."""
    config = yaml.safe_load(population.config_path.read_text()) or {}
    keys = sorted((config.get("pbt") or {}).get("mutate") or {})
    copies: list[dict[str, str]] = []
    if population.lineage_path.is_file():
        with open(population.lineage_path, newline="") as f:
            copies = sorted(csv.DictReader(f), key=lambda r: float(r["env_steps"]))
    found: dict[str, list[Schedule]] = {key: [] for key in keys}
    members = int((config.get("pbt") or {}).get("members", 0))
    for member in range(members):
        run = population.member(member)
        if not (run / "config.yaml").is_file():
            continue
        own = yaml.safe_load((run / "config.yaml").read_text()) or {}
        end = _last_env_steps(run)
        for key in keys:
            rows = [r for r in copies if int(r["member"]) == member and r["key"] == key]
            first = float(rows[0]["old"]) if rows else _lookup(own, key)
            if first is None:
                continue
            schedule = Schedule(member, [0.0], [first])
            for row in rows:
                schedule.env_steps.append(float(row["env_steps"]))
                schedule.values.append(float(row["new"]))
            schedule.env_steps.append(max(end, schedule.env_steps[-1]))
            schedule.values.append(schedule.values[-1])
            found[key].append(schedule)
    return found


def draw_schedules(population: PopulationDir) -> Figure:
    """A panel per mutated key, a step line per member (log y axis for a key mutated on a
    log scale), the copies marked."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    config = yaml.safe_load(population.config_path.read_text()) or {}
    scales = {key: (spec or {}).get("scale", "log")
              for key, spec in ((config.get("pbt") or {}).get("mutate") or {}).items()}
    found = schedules(population)
    fig = Figure(figsize=(5.0 * max(len(found), 1), 3.2), dpi=120, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, max(len(found), 1), squeeze=False)[0]
    for ax, (key, members) in zip(axes, found.items(), strict=False):
        for schedule in members:
            ax.step(schedule.env_steps, schedule.values, where="post",
                    color=f"C{schedule.member % 10}", label=f"member {schedule.member}")
            ax.plot(schedule.env_steps[1:-1], schedule.values[1:-1], "o", markersize=3,
                    color=f"C{schedule.member % 10}")
        if scales.get(key) == "log":
            ax.set_yscale("log")
        ax.set_title(key, fontsize=10)
        ax.set_xlabel("env steps")
        ax.grid(alpha=0.3)
    axes[-1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.03, 1.0))
    fig.suptitle(f"{population.path}: values trained with (a dot: a copy)", fontsize=10)
    return fig
