"""Where the cost model's per-rank figures come from: a run's own timings, or a model.

:func:`measured_calibration` reads a run's ``progress.csv`` (the time a collecting rank
took to fill its rollout, ``time_collect_s``, and the learner's ``time_compute_s``, the
medians of the updates after the first) and the spread of the collection time across
ranks: the logged figure is the mean over the job's collecting ranks, so its spread over
updates times the square root of their count stands for one rank's spread.

:func:`modelled_calibration` builds the same figures from per-step costs of a kind of env
on one GPU (:data:`STEP_COSTS`, from published figures: docs/scaling.md), for a config that
has not run yet. Every figure says which of the two it is.
"""
from __future__ import annotations

import csv
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from hpcrl.scheme.cost_model import Calibration

# the spread of one rank's collection time where nothing measured it: envs of one kind,
# ranks alike (docs/scaling.md shows what a larger spread costs)
DEFAULT_CV = 0.05


@dataclass(frozen=True)
class StepCosts:
    """Modelled per-step costs on one GPU node: seconds an env step takes a collecting rank
    (its envs stepped, its action computed), and seconds of gradient compute per sample
    and per gradient step (kernel launches, the optimiser)."""

    env_step_s: float
    sample_s: float
    gradient_step_s: float
    basis: str


STEP_COSTS: dict[str, StepCosts] = {
    # EnvPool's ALE rate, ~5k emulator frames/s a core (1.25k agent steps at frame skip 4),
    # on 8 threads for 8 envs, and LeanRL's PPO at ~6.8k agent steps/s on one H100
    "atari": StepCosts(1 / 10_000, 3e-6, 2e-3,
                       "EnvPool ALE ~5k frames/s a core on 8 cores; LeanRL PPO ~6.8k "
                       "steps/s on an H100"),
    # Sample Factory's ViZDoom rates (~2k env steps/s a core at its resolution)
    "vizdoom": StepCosts(1 / 16_000, 8e-6, 3e-3,
                         "Sample Factory's ViZDoom rate, ~2k env steps/s a core on 8 cores"),
    # vector-state envs (MuJoCo, classic control): the env is cheap, the network small
    "default": StepCosts(1 / 20_000, 1e-6, 1e-3, "a small MLP on vector observations"),
}


def step_costs(env_preset: str) -> StepCosts:
    """The modelled costs of an env of ``env.preset`` (Atari, ViZDoom, or the default)."""
    return STEP_COSTS.get(env_preset, STEP_COSTS["default"])


def read_progress(run_dir: str | Path) -> list[dict[str, float]]:
    """The rows of ``run_dir``'s progress.csv as floats (an empty cell as nan)."""
    path = Path(run_dir) / "progress.csv"
    with open(path, newline="") as f:
        return [{key: float(value) if value not in ("", None) else math.nan
                 for key, value in row.items()} for row in csv.DictReader(f)]


def collection_spread(collect_times: Sequence[float], collecting_ranks: int) -> float | None:
    """One rank's coefficient of variation of its collection time, from the job's per-update
    means over ``collecting_ranks`` ranks (None with fewer than 3 updates)."""
    values = [t for t in collect_times if t > 0 and math.isfinite(t)]
    if len(values) < 3:
        return None
    mean = statistics.fmean(values)
    return statistics.stdev(values) / mean * math.sqrt(max(collecting_ranks, 1))


def measured_calibration(rows: Sequence[Mapping[str, float]], steps_per_collection: int,
                         collecting_ranks: int, params: int, allreduces: int,
                         rollout_bytes: float, source: str, vector_steps: int = 128
                         ) -> Calibration:
    """A calibration from a run's progress rows (the first update, with its start-up costs,
    left out where there are more): collection and compute times measured, their spread
    measured where at least 3 updates ran, the gradient's size from ``params`` float32
    parameters, ``allreduces`` gradient steps an update."""
    later = list(rows[1:]) or list(rows)
    if not later:
        raise ValueError(f"{source}: progress.csv has no update to calibrate on")
    collect = statistics.median(r["time_collect_s"] for r in later)
    compute = statistics.median(r["time_compute_s"] for r in later)
    spread = collection_spread([r["time_collect_s"] for r in later], collecting_ranks)
    measured = {"collect_s", "compute_s"} | ({"collect_cv"} if spread is not None else set())
    return Calibration(steps_per_collection, collect, DEFAULT_CV if spread is None else spread,
                       compute, 4.0 * params, allreduces, rollout_bytes, vector_steps,
                       frozenset(measured), source)


def modelled_calibration(env_preset: str, steps_per_collection: int, samples_per_update: int,
                         gradient_steps: int, params: int, rollout_bytes: float,
                         vector_steps: int = 128) -> Calibration:
    """A calibration from :data:`STEP_COSTS` for a config that has not run: a collecting
    rank's ``steps_per_collection`` env steps, a gradient worker's ``gradient_steps`` over
    ``samples_per_update`` samples (each sample once an epoch: the caller counts epochs in
    both), ``params`` float32 parameters."""
    costs = step_costs(env_preset)
    return Calibration(steps_per_collection, steps_per_collection * costs.env_step_s,
                       DEFAULT_CV,
                       samples_per_update * costs.sample_s
                       + gradient_steps * costs.gradient_step_s,
                       4.0 * params, gradient_steps, rollout_bytes, vector_steps,
                       frozenset(), f"modelled ({costs.basis})")
