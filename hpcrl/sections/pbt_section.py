"""The ``pbt`` section: what a population-based training (PBT) population is asked to do,
:class:`PbtConfig` (read by ``hpcrl pbt``; ``hpcrl train`` trains one run and says it does not
read it).

The defaults are Ray Tune's (quantile 0.25, resample probability 0.25, factors 0.8 and 1.2)
with two differences, both for a batch scheduler: the interval counts env steps, not wall
seconds (members on a shared cluster run at different speeds, and a member is compared by
its experience), and a lagging member copies a leader only past optional gap thresholds
(Sample Factory's idea: a leader ahead by noise is no reason to throw training away); both
gaps are 0 by default, as in Ray Tune.

A key to mutate has a range and a scale (:class:`KeyRange`): ``log`` for a learning rate or
an entropy coefficient (a step is a factor), ``linear`` for a clip ratio, and
``log_complement`` for a discount factor γ: the range stays written in γ's own units
(``0.9`` to ``0.999``) while sampling and perturbing act on 1 − γ on a log scale, as Sample
Factory mutates γ (0.99 → 0.999 is then as big a step as 0.9 → 0.99).

:meth:`PbtConfig.problems` names each bad value by its key (``pbt.…``) and says the fix;
:func:`hpcrl.population.settings.check_settings` raises them as one error before any
member starts.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from hpcrl.field_docs import doc

__all__ = ["SCALES", "KeyRange", "PbtConfig"]

SCALES = ("log", "linear", "log_complement")


@dataclass(frozen=True)
class KeyRange:
    """The range ``[low, high]`` a mutated hyperparameter stays in, and its scale."""

    low: float = doc("The smallest value the key may take.")
    high: float = doc("The largest value the key may take.")
    scale: str = doc("How the key is sampled and perturbed: 'log' (a step is a factor: a "
                     "learning rate), 'linear' (a clip ratio) or 'log_complement' (log scale "
                     "on 1 - value: a discount factor gamma).", "log")

    def problems(self, key: str) -> list[str]:
        """What is wrong with this range of the key ``key`` (``pbt.mutate.<key>``), each with
        its fix; empty when it can be used."""
        where = f"pbt.mutate.{key}"
        if self.scale not in SCALES:
            return [f"{where}.scale is {self.scale!r}: use one of {', '.join(SCALES)}"]
        if not (_finite(self.low) and _finite(self.high)):
            return [f"{where}: low and high must be finite numbers (got {self.low!r}, "
                    f"{self.high!r})"]
        if self.low >= self.high:
            return [f"{where}: low ({self.low}) must be below high ({self.high}); swap them, "
                    "or drop the key to keep it fixed"]
        if self.scale == "log" and self.low <= 0:
            return [f"{where}: a log range needs low > 0 (got {self.low}); use a positive "
                    "low or scale: linear"]
        if self.scale == "log_complement" and self.high >= 1:
            return [f"{where}: a log_complement range acts on 1 - value and needs high < 1 "
                    f"(got {self.high}); use a high below 1 (for example 0.999)"]
        return []


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class PbtConfig:
    """A PBT population: its size, how often members compare, and how they copy and mutate."""

    members: int = doc("How many members the population has, each a run of its own (member "
                       "k trains with seed + k).", 4)
    interval_env_steps: int = doc(
        "Env steps a member trains between two comparisons with its peers (Ray Tune counts "
        "60 s of wall time; env steps compare members by experience, whatever their "
        "speed).",
        1_000_000)
    objective: str = doc("The statistic members are ranked by, higher is better: "
                         "'mean_return' (the newest evaluation's, train.eval_every; before "
                         "the first, or without evaluations, the training episodes'), or a "
                         "progress.csv column.", "mean_return")
    bottom_quantile: float = doc("The share of the compared members, the worst, that copy a "
                                 "leader.", 0.25)
    top_quantile: float = doc("The share of the compared members, the best, that may be "
                              "copied.", 0.25)
    resample_probability: float = doc("The chance that a mutated key is drawn anew from its "
                                      "range rather than multiplied by a perturb factor.", 0.25)
    perturb_factors: tuple[float, ...] = doc("The factors a perturbed key is multiplied by, "
                                             "one drawn at random.", (0.8, 1.2))
    mutate: dict[str, KeyRange] = doc("The keys to mutate, each a real-valued key of algo, "
                                      "replay or rnd with its range and scale, e.g. algo.lr: "
                                      "{low: 1.0e-5, high: 1.0e-2, scale: log}.", factory=dict)
    absolute_gap: float = doc("How much a leader's score must beat the copier's by (0: any "
                              "better score).", 0.0)
    relative_gap: float = doc("How much a leader's score must beat the copier's by, as a "
                              "fraction of the copier's |score| (0: any better score).", 0.0)
    exploit: bool = doc("Whether lagging members copy a leader and mutate its values (false: "
                        "every member trains its drawn values to the end, random search at "
                        "the same compute: the baseline of docs/pbt.md's comparison).", True)

    def problems(self) -> list[str]:
        """Every bad value, each naming its key and its fix; empty when the settings can be
        used."""
        found = [*self._count_problems(), *self._quantile_problems(),
                 *self._mutation_problems()]
        for key in ("absolute_gap", "relative_gap"):
            value = getattr(self, key)
            if not _finite(value) or value < 0:
                found.append(f"pbt.{key} is {value!r}: use a number >= 0 (0 turns it off)")
        if isinstance(self.mutate, dict):
            for key, key_range in self.mutate.items():
                if isinstance(key_range, KeyRange):
                    found.extend(key_range.problems(key))
        return found

    def _count_problems(self) -> list[str]:
        found = []
        if not isinstance(self.members, int) or self.members < 2:
            found.append(f"pbt.members is {self.members!r}: a population needs at least 2 "
                         "members")
        if not isinstance(self.interval_env_steps, int) or self.interval_env_steps < 1:
            found.append(f"pbt.interval_env_steps is {self.interval_env_steps!r}: use a "
                         "positive number of env steps")
        if not isinstance(self.objective, str) or not self.objective:
            found.append("pbt.objective is empty: name the statistic to rank by, for example "
                         "mean_return")
        return found

    def _quantile_problems(self) -> list[str]:
        found = []
        for key in ("bottom_quantile", "top_quantile"):
            value = getattr(self, key)
            if not _finite(value) or not 0 < value < 1:
                found.append(f"pbt.{key} is {value!r}: use a share in (0, 1), for example 0.25")
        if not found and self.bottom_quantile + self.top_quantile > 1:
            found.append(f"pbt.bottom_quantile ({self.bottom_quantile}) and pbt.top_quantile "
                         f"({self.top_quantile}) overlap: a member would both copy and be "
                         "copied; make their sum at most 1 (Ray Tune uses 0.25 each)")
        probability = self.resample_probability
        if not _finite(probability) or not 0 <= probability <= 1:
            found.append(f"pbt.resample_probability is {probability!r}: use a probability in "
                         "[0, 1]")
        return found

    def _mutation_problems(self) -> list[str]:
        found = []
        factors = self.perturb_factors
        if (not factors or not all(_finite(f) and f > 0 for f in factors)
                or all(f == 1 for f in factors)):
            found.append(f"pbt.perturb_factors is {factors!r}: use positive factors, not all "
                         "1, for example [0.8, 1.2]")
        if not isinstance(self.mutate, dict) or not all(
                isinstance(r, KeyRange) for r in self.mutate.values()):
            found.append("pbt.mutate must map each key to a range (low, high, scale)")
        elif not self.mutate:
            found.append("pbt.mutate is empty: name at least one key to mutate, for example "
                         "algo.lr: {low: 1.0e-5, high: 1.0e-2, scale: log}")
        return found
