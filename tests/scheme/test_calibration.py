"""Calibrations of the cost model: from a run's progress rows, or modelled per-step costs."""
import math

import pytest

from hpcrl.scheme.calibration import (
    DEFAULT_CV,
    collection_spread,
    measured_calibration,
    modelled_calibration,
    step_costs,
)


def _rows(collect, compute):
    return [{"time_collect_s": a, "time_compute_s": b} for a, b in zip(collect, compute,
                                                                       strict=True)]


def test_measured_calibration_takes_medians_after_the_first_update():
    rows = _rows([9.0, 1.0, 1.2, 0.8, 1.1], [5.0, 0.5, 0.4, 0.6, 0.5])
    cal = measured_calibration(rows, 1024, 4, 1000, 16, 28e6, "run")
    assert (cal.collect_s, cal.compute_s) == (pytest.approx(1.05), 0.5)
    values = [1.0, 1.2, 0.8, 1.1]
    mean = sum(values) / 4
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / 3)
    # the logged time is a mean over 4 collecting ranks: one rank spreads twice as much
    assert cal.collect_cv == pytest.approx(std / mean * 2)
    assert cal.grad_bytes == 4000 and cal.allreduces == 16
    assert cal.measured == {"collect_s", "compute_s", "collect_cv"}


def test_two_updates_give_no_spread():
    assert collection_spread([1.0, 1.1], 2) is None
    cal = measured_calibration(_rows([2.0, 1.0, 1.1], [1, 1, 1]), 8, 1, 10, 1, 0.0, "run")
    assert cal.collect_cv == DEFAULT_CV and "collect_cv" not in cal.measured


def test_modelled_calibration_from_step_costs():
    costs = step_costs("atari")
    cal = modelled_calibration("atari", 1024, 4096, 16, 1_000_000, 28e6)
    assert cal.collect_s == pytest.approx(1024 * costs.env_step_s)
    assert cal.compute_s == pytest.approx(4096 * costs.sample_s + 16 * costs.gradient_step_s)
    assert cal.measured == frozenset() and cal.source.startswith("modelled")
    assert step_costs("no-such-preset") == step_costs("default")
