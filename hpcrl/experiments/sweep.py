"""Seeds and grids of one config: a sweep directory with one run directory per point.

``hpcrl sweep`` (points one after the other or N at a time on this machine) and ``hpcrl
slurm sweep`` (one Slurm job array, a task per point) expand the same sweep and train each
point with the same command line: ``hpcrl train SWEEP/sweep-config.yaml --run-dir
SWEEP/<point> --set ...`` (``--resume SWEEP/<point>`` once it holds a checkpoint)::

    SWEEP/
      sweep.yaml          the manifest: config, --set overrides, grid, seeds and every point
      sweep-config.yaml   the CONFIG file as it was when the sweep began (what points train)
      <point>/            one run directory per point, e.g. lr=0.001,seed=2/
      logs/               each point's console output (local) or Slurm log (array)

A point is named by the grid values it takes and its seed; its overrides come after the
sweep's own ``--set`` ones. Starting a sweep again in the same directory goes on with the
points that did not finish (the manifest must match; ``--resume SWEEP`` reads it instead).
"""
from __future__ import annotations

import itertools
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from hpcrl.config.loader import ConfigError, load_config
from hpcrl.runtime.run_dir import RunDir, is_finished
from hpcrl.sections.schema import Config

MANIFEST = "sweep.yaml"
CONFIG_COPY = "sweep-config.yaml"
SAFE = re.compile(r"[^A-Za-z0-9._+=-]")


class SweepError(ConfigError):
    """A sweep that cannot be expanded, started or continued; the message names the fix."""


def parse_seeds(spec: str) -> list[int]:
    """``"0-4"`` -> [0, 1, 2, 3, 4]; ``"0,3,7"``; ``"0-2,10"``; each seed once, in order."""
    seeds: list[int] = []
    for part in spec.split(","):
        match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not match:
            raise SweepError(f"--seeds '{spec}': '{part}' is not a seed or a range; write e.g. "
                             f"--seeds 0-4 or --seeds 0,3,7")
        low = int(match.group(1))
        high = int(match.group(2)) if match.group(2) is not None else low
        if high < low:
            raise SweepError(f"--seeds '{spec}': the range {part} runs backwards")
        seeds += [s for s in range(low, high + 1) if s not in seeds]
    return seeds


def split_values(text: str) -> list[str]:
    """``"3e-4,1e-3"`` -> ["3e-4", "1e-3"]; commas inside brackets stay (``[64,64],[32]``)."""
    values, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += char in "[{("
        depth -= char in "]})"
        if char == "," and depth == 0:
            values.append(text[start:i].strip())
            start = i + 1
    values.append(text[start:].strip())
    return values


def parse_grid(items: Sequence[str]) -> dict[str, list[str]]:
    """``--grid KEY=V1,V2`` items as ``{KEY: [V1, V2]}`` (values as written: YAML text)."""
    grid: dict[str, list[str]] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        values = split_values(text) if sep else []
        if not key or not values or "" in values:
            raise SweepError(f"--grid '{item}' is not KEY=VALUE,VALUE,...; write e.g. "
                             f"--grid algo.lr=3e-4,1e-3")
        if key == "seed":
            raise SweepError("--grid seed=...: give seeds with --seeds (e.g. --seeds 0-4), "
                             "which names them in every point")
        if key in grid:
            raise SweepError(f"--grid {key} is given twice; list all its values in one --grid")
        if len(set(values)) != len(values):
            raise SweepError(f"--grid '{item}' repeats a value")
        grid[key] = values
    return grid


@dataclass(frozen=True)
class Point:
    """One run of the sweep: its directory name and its overrides (grid values, seed)."""

    name: str
    sets: tuple[str, ...]


@dataclass
class Sweep:
    """A sweep directory and what it trains."""

    path: Path
    config: str | None          # the user's CONFIG file (absolute), None: embedded default
    sets: tuple[str, ...]          # the sweep's --set overrides, before each point's
    grid: dict[str, list[str]]
    seeds: list[int]
    points: list[Point] = field(default_factory=list)
    jobs: int = 1                  # hpcrl sweep: points trained at a time (--jobs)
    launch: str | None = None   # hpcrl sweep: how a point's ranks start (--launch)

    @property
    def config_copy(self) -> Path | None:
        """The config the points train (a copy of CONFIG taken when the sweep began)."""
        return self.path / CONFIG_COPY if self.config is not None else None

    def run_dir(self, point: Point) -> RunDir:
        """The run directory ``point`` trains in."""
        return RunDir(self.path / point.name)

    def point_sets(self, point: Point) -> list[str]:
        """Every override of a point: the sweep's, then the point's own."""
        return [*self.sets, *point.sets]

    def train_args(self, point: Point) -> list[str]:
        """The ``hpcrl`` arguments that train ``point``: a fresh start, or a resume once its
        run directory holds a checkpoint."""
        run = self.run_dir(point)
        if run.checkpoint_path.exists():
            return ["train", "--resume", str(run.path)]
        args = ["train", *([str(self.config_copy)] if self.config_copy else []),
                "--run-dir", str(run.path)]
        for item in self.point_sets(point):
            args += ["--set", item]
        return args

    def unfinished(self) -> list[int]:
        """Indices of the points that have not finished training."""
        return [i for i, p in enumerate(self.points) if not is_finished(self.run_dir(p))]

    def manifest(self) -> dict[str, Any]:
        """What the sweep trains, as ``sweep.yaml`` records it (a restart must match)."""
        return {"config": self.config, "sets": list(self.sets), "grid": self.grid,
                "seeds": self.seeds,
                "points": [{"name": p.name, "sets": list(p.sets)} for p in self.points]}

    def write_manifest(self) -> None:
        """``sweep.yaml``: the manifest, and how ``hpcrl sweep`` last trained it here
        (``jobs``, ``launch``: a resume keeps them; they may change without making it
        another sweep)."""
        header = (f"# hpcrl sweep: {len(self.points)} points ({len(self.seeds)} seeds); each "
                  f"trains in the directory named after it\n")
        record = {**self.manifest(), "jobs": self.jobs, "launch": self.launch}
        (self.path / MANIFEST).write_text(header + yaml.safe_dump(record, sort_keys=False))

    def train_here(self, jobs: int | None, launch: str | None) -> None:
        """Train with ``jobs`` points at a time and ``launch`` as given, or as recorded when
        not given (None); a new value is recorded for the next resume."""
        given = (jobs or self.jobs, launch if launch is not None else self.launch)
        if given != (self.jobs, self.launch):
            self.jobs, self.launch = given
            self.write_manifest()


def _short_keys(keys: Sequence[str]) -> dict[str, str]:
    """Each grid key by its last part (``algo.lr`` -> ``lr``) unless two keys share it."""
    last = [k.rsplit(".", 1)[-1] for k in keys]
    return {k: (s if last.count(s) == 1 else k) for k, s in zip(keys, last, strict=True)}


def expand(grid: dict[str, list[str]], seeds: Sequence[int]) -> list[Point]:
    """Every combination of the grid's values, each with every seed (seeds vary fastest)."""
    short = _short_keys(list(grid))
    points: list[Point] = []
    names: set[str] = set()
    for combo in itertools.product(*grid.values()):
        for seed in seeds:
            pairs = [*zip(grid, combo, strict=True), ("seed", str(seed))]
            name = ",".join(SAFE.sub("_", f"{short.get(k, k)}={v}".replace(" ", ""))
                            for k, v in pairs)
            if name in names:  # values that differ only in unsafe characters
                name = f"{name}-{len(points)}"
            names.add(name)
            points.append(Point(name, tuple(f"{k}={v}" for k, v in pairs)))
    return points


def check_points(sweep: Sweep) -> list[Config]:
    """Every point's config, built as its run will build it: a bad key or value is an error
    naming the point before any point starts."""
    configs = []
    source = sweep.config_copy if sweep.config_copy and sweep.config_copy.exists() \
        else sweep.config
    for point in sweep.points:
        try:
            configs.append(load_config(source, sweep.point_sets(point)))
        except ConfigError as err:
            raise SweepError(f"point {point.name}: {err}") from None
    return configs


def new_sweep(path: Path, config: str | None, sets: Sequence[str],
              grid_items: Sequence[str], seeds_spec: str | None) -> Sweep:
    """The sweep these options describe (nothing written yet). Without ``--seeds`` every
    point takes the seed of the config."""
    grid = parse_grid(grid_items)
    config = str(Path(config).resolve()) if config is not None else None
    if seeds_spec is None:
        seeds = [load_config(config, list(sets)).seed]
    else:
        seeds = parse_seeds(seeds_spec)
    sweep = Sweep(path.resolve(), config, tuple(sets), grid, seeds)
    sweep.points = expand(grid, seeds)
    return sweep


def read_sweep(path: Path) -> Sweep:
    """The sweep recorded in ``path``'s manifest."""
    manifest = path / MANIFEST
    if not manifest.is_file():
        raise SweepError(f"'{path}' is not a sweep directory (no {MANIFEST}); start one with "
                         f"hpcrl sweep [CONFIG] --seeds ... --run-dir {path}")
    data = yaml.safe_load(manifest.read_text()) or {}
    sweep = Sweep(path.resolve(), data.get("config"), tuple(data.get("sets") or ()),
                  dict(data.get("grid") or {}), list(data.get("seeds") or []),
                  jobs=int(data.get("jobs") or 1), launch=data.get("launch"))
    sweep.points = [Point(p["name"], tuple(p["sets"])) for p in data.get("points") or []]
    return sweep


def _config_changed(sweep: Sweep) -> bool:
    copy = sweep.config_copy
    return (copy is not None and copy.exists() and sweep.config is not None
            and Path(sweep.config).is_file()
            and Path(sweep.config).read_bytes() != copy.read_bytes())


def start_sweep(wanted: Sweep) -> Sweep:
    """Write ``wanted``'s manifest and config copy, checking every point first; in a
    directory that holds a sweep already, the recorded one must be the same (it goes on)."""
    if (wanted.path / MANIFEST).exists():
        recorded = read_sweep(wanted.path)
        if recorded.manifest() != wanted.manifest():
            raise SweepError(f"'{wanted.path}' holds another sweep (its {MANIFEST} lists other "
                             f"points, config or overrides); continue that one with hpcrl sweep "
                             f"--resume {wanted.path}, or pick a new --run-dir")
        if _config_changed(recorded):
            raise SweepError(f"{recorded.config} changed since the sweep in '{wanted.path}' "
                             f"began; its points go on training {recorded.config_copy} (hpcrl "
                             f"sweep --resume {wanted.path}), or start a new sweep with another "
                             f"--run-dir")
        check_points(recorded)
        return recorded
    if wanted.path.exists() and any(wanted.path.iterdir()):
        raise SweepError(f"'{wanted.path}' is not empty and holds no sweep; pick a new --run-dir")
    check_points(wanted)
    wanted.path.mkdir(parents=True, exist_ok=True)
    if wanted.config is not None and wanted.config_copy is not None:
        shutil.copyfile(wanted.config, wanted.config_copy)
    wanted.write_manifest()
    return wanted


def resume_sweep(path: Path) -> Sweep:
    """The sweep recorded in ``path``, its points checked again."""
    sweep = read_sweep(path)
    check_points(sweep)
    return sweep
