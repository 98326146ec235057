"""The explore step: new values for the hyperparameters a member copied from its leader.

Each key of :attr:`~hpcrl.sections.pbt_section.PbtConfig.mutate` is, with the resample
probability, drawn anew from its range (uniform on its scale: log-uniform for ``log``,
log-uniform on 1 − value for ``log_complement``), and otherwise multiplied by one of the
perturb factors drawn at random (for ``log_complement`` it is 1 − value that is multiplied,
so a factor 0.8 moves γ = 0.99 to 0.992), then clipped into the range, as Ray Tune does for
its defaults. Ray Tune leaves a perturbed continuous value unclipped; here a range is a
promise (a learning rate stays where the user allowed it), so the value is clipped. A value of
0 on a ``linear`` scale stays 0 under the factors until a resample: give it a range above 0.

Every draw comes from the caller's RNG, keys in sorted order, so one seed gives one result.
"""
from __future__ import annotations

import math
import random
from collections.abc import Mapping

from hpcrl.errors import ConfigError
from hpcrl.sections.pbt_section import KeyRange, PbtConfig

__all__ = ["check_keys", "initial_values", "mutate", "mutate_value", "perturb", "sample"]


def _forward(value: float, scale: str) -> float:
    """``value`` on the axis where ``scale`` is uniform."""
    if scale == "log":
        return math.log(value)
    if scale == "log_complement":
        return math.log(1.0 - value)
    return value


def _back(axis_value: float, scale: str) -> float:
    if scale == "log":
        return math.exp(axis_value)
    if scale == "log_complement":
        return 1.0 - math.exp(axis_value)
    return axis_value


def _clip(value: float, key_range: KeyRange) -> float:
    return min(max(value, key_range.low), key_range.high)


def sample(key_range: KeyRange, rng: random.Random) -> float:
    """A value drawn uniformly on ``key_range``'s scale between its low and its high."""
    ends = (_forward(key_range.low, key_range.scale), _forward(key_range.high, key_range.scale))
    return _clip(_back(rng.uniform(*ends), key_range.scale), key_range)


def perturb(value: float, key_range: KeyRange, factor: float) -> float:
    """``value`` multiplied by ``factor`` (1 − value for ``log_complement``), clipped into the
    range."""
    if key_range.scale == "log_complement":
        return _clip(1.0 - (1.0 - value) * factor, key_range)
    return _clip(value * factor, key_range)


def mutate_value(value: float, key_range: KeyRange, settings: PbtConfig,
                 rng: random.Random) -> float:
    """One key's new value: resampled with the resample probability, else perturbed."""
    if rng.random() < settings.resample_probability:
        return sample(key_range, rng)
    return perturb(value, key_range, rng.choice(settings.perturb_factors))


def mutate(values: Mapping[str, float], settings: PbtConfig,
           rng: random.Random) -> dict[str, float]:
    """``values`` with every key of ``settings.mutate`` mutated (the others as they are)."""
    check_keys(values, settings)
    mutated = dict(values)
    for key in sorted(settings.mutate):
        mutated[key] = mutate_value(float(values[key]), settings.mutate[key], settings, rng)
    return mutated


def check_keys(values: Mapping[str, float], settings: PbtConfig) -> None:
    """A :class:`~hpcrl.errors.ConfigError` naming the keys of ``settings.mutate`` that
    ``values`` lacks (a key to mutate that the run does not have)."""
    missing = sorted(set(settings.mutate) - set(values))
    if missing:
        raise ConfigError(f"pbt.mutate names {', '.join(missing)}, which the run's "
                          "hyperparameters do not have: name keys the run reports (for "
                          f"example {', '.join(sorted(values)[:3]) or 'algo.lr'})")


def initial_values(settings: PbtConfig, rng: random.Random) -> dict[str, float]:
    """A member's first values of every key to mutate, each drawn from its range (a
    population starts spread over the ranges, as the with/without comparison needs)."""
    return {key: sample(settings.mutate[key], rng) for key in sorted(settings.mutate)}
