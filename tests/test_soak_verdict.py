"""The soak benchmark's reading of RSS samples (benchmarks/soak.py): a flat rank with page
noise reads "flat", a rank that keeps growing reads "GROWS", a short noisy run says it
cannot tell, and a replay learner's filling replay is not counted as growth."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
from soak import Soak  # noqa: E402

MB = 2**20
PAGE = 4096


def soak_of(rss_of_steps, steps: np.ndarray, **kw) -> Soak:
    soak = Soak("x", ["gradient_worker"], **kw)
    soak.samples = [(float(i), int(s), [int(rss_of_steps(s))]) for i, s in enumerate(steps)]
    return soak


def page_noise(seed: int = 0, pages: int = 2):
    rng = np.random.default_rng(seed)
    return lambda: PAGE * int(rng.integers(0, pages + 1))


def test_page_noise_over_millions_of_steps_reads_flat():
    noise = page_noise()
    soak = soak_of(lambda s: 250 * MB + noise(), np.linspace(1e5, 3e6, 200))
    slope, resolution = soak.growth(0)
    assert abs(slope) < 0.01 and resolution < 0.02
    assert soak.verdict(0) == "flat"


def test_steady_growth_reads_grows():
    noise = page_noise()
    soak = soak_of(lambda s: 250 * MB + 0.5 * MB * s / 1e6 + noise(), np.linspace(1e5, 3e6, 200))
    assert soak.growth(0)[0] == pytest.approx(0.5, abs=0.01)
    assert soak.verdict(0) == "GROWS"


def test_a_short_noisy_run_is_not_resolved():
    noise = page_noise(pages=64)  # allocator chunks of a quarter MB over 50k steps
    soak = soak_of(lambda s: 250 * MB + noise(), np.linspace(1e4, 6e4, 30))
    assert soak.growth(0)[1] > 0.1
    assert soak.verdict(0).startswith("not resolved")


def test_growth_that_levels_off_is_not_called_a_leak():
    # 2 MB of warm-up spread over the first million steps, then nothing
    soak = soak_of(lambda s: 250 * MB + 2 * MB * min(s, 1.3e6) / 1.3e6,
                   np.linspace(1e5, 2e6, 200))
    assert soak.growth(0, late=True)[0] < 0.01
    assert soak.verdict(0) != "GROWS"


def test_the_learners_filling_replay_is_taken_out():
    per_step = 100.0  # bytes each stored transition makes resident
    soak = soak_of(lambda s: 250 * MB + per_step * min(s, 1e6), np.linspace(1e5, 3e6, 200),
                   replay_bytes_per_step=per_step, replay_capacity=1_000_000)
    assert abs(soak.growth(0)[0]) < 0.01 and soak.verdict(0) == "flat"
