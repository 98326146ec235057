"""How long a synchronous step waits for the slowest of p collecting ranks.

Each rank's time to fill one rollout is taken as normally distributed across ranks, with a
mean and a coefficient of variation (standard deviation over mean). The expected k-th
shortest of p such times comes from Blom's approximation to normal order statistics,
``mean * (1 + cv * z((k - 0.375) / (p + 0.25)))``, with ``z`` the standard normal quantile:
no sampling, so a prediction is one number and tests can compare it exactly.

With DD-PPO's preemption (``scheme.preemption``) the step ends once ``fraction_workers`` of
the ranks finished, but never before every straggler collected ``fraction_samples`` of its
steps; the stragglers' unfinished steps are lost frames (:func:`synchronous_collection`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

_UNIT = NormalDist()
# no rank is faster than this share of the mean (a normal tail would reach zero at cv > 0.3)
FLOOR = 0.05


def order_statistic(k: int, p: int, mean: float, cv: float) -> float:
    """The expected ``k``-th shortest (1-based) of ``p`` collection times of mean ``mean``
    and coefficient of variation ``cv`` (Blom's approximation), floored at 5 % of the mean."""
    if not 1 <= k <= p:
        raise ValueError(f"order statistic {k} of {p} does not exist")
    if p == 1 or cv == 0.0:
        return mean
    z = _UNIT.inv_cdf((k - 0.375) / (p + 0.25))
    return mean * max(1.0 + cv * z, FLOOR)


def expected_maximum(p: int, mean: float, cv: float) -> float:
    """The expected longest of ``p`` collection times: what a step without preemption waits."""
    return order_statistic(p, p, mean, cv)


@dataclass(frozen=True)
class Collection:
    """One synchronous collection step of p ranks: its wall time and the share of the
    rollouts' steps actually collected (below 1 where stragglers were preempted)."""

    wall_s: float
    collected: float


def synchronous_collection(p: int, mean: float, cv: float, fraction_workers: float = 1.0,
                           fraction_samples: float = 1.0) -> Collection:
    """The expected wall time of a collection step that waits for ``p`` ranks, and the
    share of steps collected. Without preemption (both fractions 1) it is the expected
    maximum. With it, the step ends at the ``ceil(fraction_workers * p)``-th finish, or
    later where the slowest rank has not yet collected ``fraction_samples`` of its steps
    (each straggler stops at the later of the two); it keeps the steps it collected."""
    if p < 1:
        raise ValueError("a collection step needs at least one rank")
    times = [order_statistic(k, p, mean, cv) for k in range(1, p + 1)]
    if p == 1 or (fraction_workers >= 1.0 and fraction_samples >= 1.0):
        return Collection(times[-1], 1.0)
    needed = min(max(math.ceil(fraction_workers * p), 1), p)
    told = times[needed - 1]  # when the stragglers are told to stop
    # each stops then, or once it holds fraction_samples of its steps if that comes later
    collected = sum(min(1.0, max(told / t, fraction_samples)) for t in times) / p
    return Collection(max(told, fraction_samples * times[-1]), collected)
