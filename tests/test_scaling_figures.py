"""benchmarks/scaling.py's reading of an emulated Ape-X job (docs/scaling.md, *Ape-X
checked*): a replay learner that trains in bursts is read per env step over all its rows,
not by a median of rows, and the cost model, calibrated on the 8-rank run, predicts the
16-rank run within 10 % once the learner's compute grows with its collectors."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from scaling import (  # noqa: E402
    measured_update,
    model_of_run,
    per_update,
    with_figures_of_rows,
)

APEX = ROOT / "docs" / "figures" / "scaling-emulation-apex.jsonl"


def row(steps: float, wall: float, compute: float) -> dict[str, float]:
    return {"updates": 0.0, "env_steps": steps, "wall_time_s": wall, "time_collect_s": 1.0,
            "time_wait_s": 0.0, "time_compute_s": compute, "time_communicate_s": 0.1}


@pytest.mark.timeout(10)
def test_a_learner_training_in_bursts_is_read_per_env_step() -> None:
    # rows of 1,000 steps: three of 3 s (2 s compute), then a burst of 40 s (39 s compute)
    rows = [row(1000.0 * i, w, c) for i, (w, c) in
            enumerate([(0.0, 5.0), (3.0, 2.0), (6.0, 2.0), (9.0, 2.0), (49.0, 39.0)])]
    median = per_update(rows)
    burst = per_update(rows, per_step=True)
    assert median["compute_s"] == pytest.approx(2.0)  # the median never sees the burst
    assert burst["compute_s"] == pytest.approx((2.0 * 3 + 39.0) / 4)
    assert burst["update_s"] == pytest.approx(49.0 / 4)


@pytest.mark.timeout(30)
def test_the_model_from_8_apex_ranks_predicts_16_within_10_percent() -> None:
    runs = sorted((with_figures_of_rows("apex", json.loads(line))
                   for line in APEX.read_text().splitlines() if line.strip()),
                  key=lambda r: r["ranks"])
    base, big = runs[0], runs[-1]
    assert (base["ranks"], big["ranks"]) == (8, 16)
    measured = measured_update("apex", big)
    assert model_of_run("apex", 16, base) == pytest.approx(measured, rel=0.10)
    assert model_of_run("apex", 8, base) == pytest.approx(measured_update("apex", base),
                                                          rel=0.01)
