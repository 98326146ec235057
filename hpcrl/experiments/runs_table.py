"""What a set of run directories holds: one summary per run, grouped over seeds.

``hpcrl runs DIR...`` and ``hpcrl plot`` read runs through :func:`find_runs` (a run
directory, or any directory above run directories: a sweep) and :func:`summarize`; runs
whose configs differ only in ``seed`` form one group. Runs of different algorithms differ in
dozens of keys (their defaults differ), so a group is named by the few keys that tell the
groups apart (:func:`telling_keys`), chosen in the order of :func:`key_rank`: what is trained
first, then hyperparameters, then the network, then how the run is managed.
"""
from __future__ import annotations

import csv
import json
import math
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from hpcrl.errors import ExplainedError
from hpcrl.runtime.run_dir import ENV_FAILED_MARKER, RunDir, is_finished

STALE_S = 900.0  # a run whose progress.csv has not changed for this long is not running


@dataclass
class RunSummary:
    """One run: where it is, its config, how far it got and how it ended."""

    path: Path
    config: dict[str, Any]
    env_steps: int
    total_env_steps: int
    wall_time_s: float
    last_return: float | None
    eval_return: float | None
    state: str  # running, finished, preempted or failed
    rows: list[dict[str, str]] = field(default_factory=list, repr=False)
    best_eval_return: float | None = None  # the best row of eval.csv (train.eval_every)

    @property
    def seed(self) -> int:
        """The run's ``seed`` config key (0 when the config has none)."""
        return int(self.config.get("seed", 0))


class NoRuns(ExplainedError, FileNotFoundError):
    """A path given to ``hpcrl runs`` / ``hpcrl plot`` that is no directory or holds no run."""


def find_runs(paths: Iterable[str | Path]) -> list[Path]:
    """The run directories at or below ``paths`` (a run has a ``config.yaml`` and a
    ``progress.csv``), sorted; a path holding none is an error naming it."""
    found: list[Path] = []
    for path in map(Path, paths):
        if not path.is_dir():
            raise NoRuns(f"'{path}' is not a directory")
        here = [p.parent for p in sorted(path.rglob("progress.csv"))
                if (p.parent / "config.yaml").is_file()]
        if not here:
            raise NoRuns(f"'{path}' holds no run (no config.yaml with a progress.csv at or "
                         f"below it)")
        found += here
    return sorted(dict.fromkeys(found))


def _number(text: str | None) -> float | None:
    try:
        value = float(text) if text not in (None, "") else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) else None


def _state(run: RunDir, env_steps: int, total: int) -> str:
    if is_finished(run) or env_steps >= total:
        return "finished"
    if run.stopped_path.exists():  # (an env that failed for good: its own word, to fix)
        marker = run.stopped_path.read_text()
        return "env failed" if marker.startswith(ENV_FAILED_MARKER) else "preempted"
    if time.time() - run.progress_path.stat().st_mtime < STALE_S:
        return "running"
    return "failed"


def summarize(path: Path) -> RunSummary:
    """The summary of the run in ``path``."""
    run = RunDir(path)
    config = yaml.safe_load(run.config_path.read_text()) or {}
    with open(run.progress_path, newline="") as f:
        rows = list(csv.DictReader(f))
    last = rows[-1] if rows else {}
    total = int(config.get("train", {}).get("total_env_steps", 0))
    env_steps = int(float(last.get("env_steps", 0) or 0))
    returns = [r for r in (_number(row.get("episode_return_mean")) for row in rows)
               if r is not None]
    evaluation = (json.loads(run.eval_path.read_text()).get("mean_return")
                  if run.eval_path.exists() else None)
    return RunSummary(path, config, env_steps, total,
                      _number(last.get("wall_time_s")) or 0.0,
                      returns[-1] if returns else None, evaluation,
                      _state(run, env_steps, total), rows, _best_evaluation(run))


def _best_evaluation(run: RunDir) -> float | None:
    """The best mean return in the run's ``eval.csv``, None without one."""
    if not run.eval_curve_path.is_file():
        return None
    with open(run.eval_curve_path, newline="") as f:
        found = [_number(row.get("mean_return")) for row in csv.DictReader(f)]
    return max((v for v in found if v is not None), default=None)


def flat_config(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"algo": {"lr": 1e-3}}`` as ``{"algo.lr": 1e-3}``."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict) and value:
            out.update(flat_config(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def differences(runs: list[RunSummary]) -> list[str]:
    """The config keys (other than ``seed``) whose values differ between ``runs``, in the
    order of :func:`key_rank`."""
    flats = [flat_config(r.config) for r in runs]
    keys = set().union(*flats) if flats else set()
    return sorted((k for k in keys if k != "seed"
                   and len({_value(f.get(k)) for f in flats}) > 1), key=key_rank)


IDENTITY_KEYS = ("env.id", "algo.name", "scheme.preset")  # what is trained, and how spread
HYPERPARAMETER_SECTIONS = ("algo", "scheme", "replay", "env")


def key_rank(key: str) -> tuple[int, int, str]:
    """Where ``key`` comes among keys that differ: the env, algorithm and scheme preset
    first, then the other ``algo``, ``scheme``, ``replay`` and ``env`` keys (the
    hyperparameters a sweep varies), then the rest (the network), then ``train.*`` (how long
    the run is and how often it checkpoints, evaluates and logs); alphabetical within each."""
    if key in IDENTITY_KEYS:
        return 0, IDENTITY_KEYS.index(key), key
    section = key.split(".", 1)[0]
    if section in HYPERPARAMETER_SECTIONS:
        return 1, 0, key
    return (3 if section == "train" else 2), 0, key


def telling_keys(runs: list[RunSummary]) -> list[str]:
    """The few keys of :func:`differences` that tell every two of the runs' configs apart, in
    the order of :func:`key_rank`.

    Greedy: while some two configs look the same under the keys chosen so far, take a key of
    the best rank (:func:`key_rank`'s first field) that separates some of them, the one that
    separates the most. A SAC and a TD3 run differ in their gamma, warm-up and noise too, but
    ``algo.name`` alone tells them apart; two SAC runs more are then told apart by ``algo.lr``.
    """
    keys = differences(runs)
    configs = list({tuple(_value(flat_config(r.config).get(k)) for k in keys): None
                    for r in runs})
    alike = [configs]  # the configs the chosen keys do not tell apart, in classes
    chosen: list[int] = []
    while any(len(c) > 1 for c in alike):
        separated = {i: sum(_pairs(len(c)) - sum(map(_pairs, Counter(x[i] for x in c).values()))
                            for c in alike)
                     for i in range(len(keys)) if i not in chosen}
        best = min((i for i in separated if separated[i]),
                   key=lambda i: (key_rank(keys[i])[0], -separated[i], key_rank(keys[i])))
        chosen.append(best)
        alike = [[x for x in c if x[best] == v] for c in alike for v in {x[best] for x in c}]
    return sorted((keys[i] for i in chosen), key=key_rank)


def _pairs(n: int) -> int:
    return n * (n - 1) // 2


def _value(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def group(runs: list[RunSummary]) -> list[tuple[str, list[RunSummary]]]:
    """Runs grouped by their config less the seed, each group named ``key=value ...`` over
    its :func:`telling_keys` ("all runs" when only seeds differ)."""
    keys = telling_keys(runs)
    groups: dict[str, list[RunSummary]] = {}
    for run in runs:
        flat = flat_config(run.config)
        name = " ".join(f"{k}={flat.get(k)}" for k in keys) or "all runs"
        groups.setdefault(name, []).append(run)
    return list(groups.items())


def mean_std(values: list[float | None]) -> tuple[float | None, float | None]:
    """Mean and (population) std of the values that are there."""
    there = [v for v in values if v is not None]
    if not there:
        return None, None
    mean = sum(there) / len(there)
    return mean, math.sqrt(sum((v - mean) ** 2 for v in there) / len(there))
