"""The explore step: resample or perturb, within ranges and on each key's scale."""
from __future__ import annotations

import math
import random
import statistics

import pytest

from hpcrl.errors import ConfigError
from hpcrl.population.explore import initial_values, mutate, perturb, sample
from hpcrl.sections.pbt_section import KeyRange, PbtConfig

LR = KeyRange(1e-5, 1e-1, "log")
CLIP = KeyRange(0.1, 0.3, "linear")
GAMMA = KeyRange(0.9, 0.9999, "log_complement")
SETTINGS = PbtConfig(mutate={"lr": LR, "clip": CLIP, "gamma": GAMMA})


@pytest.mark.parametrize("key_range", [LR, CLIP, GAMMA])
def test_samples_stay_in_the_range(key_range):
    rng = random.Random(0)
    values = [sample(key_range, rng) for _ in range(500)]
    assert all(key_range.low <= v <= key_range.high for v in values)


def test_log_samples_are_uniform_in_the_exponent():
    rng = random.Random(1)
    exponents = [math.log10(sample(LR, rng)) for _ in range(2000)]
    assert statistics.median(exponents) == pytest.approx(-3.0, abs=0.15)  # linear: ~ -1.3
    linear = [sample(CLIP, rng) for _ in range(2000)]
    assert statistics.median(linear) == pytest.approx(0.2, abs=0.01)


def test_log_complement_samples_are_log_uniform_in_one_minus_gamma():
    rng = random.Random(2)
    horizons = [math.log10(1 - sample(GAMMA, rng)) for _ in range(2000)]
    assert statistics.median(horizons) == pytest.approx(-2.5, abs=0.15)  # 1-γ from 1e-1 to 1e-4


def test_perturb_multiplies_and_clips():
    assert perturb(1e-3, LR, 1.2) == pytest.approx(1.2e-3)
    assert perturb(1e-3, LR, 0.8) == pytest.approx(0.8e-3)
    assert perturb(0.09, LR, 1.2) == LR.high
    assert perturb(0.11, CLIP, 0.8) == CLIP.low
    assert perturb(0.99, GAMMA, 0.8) == pytest.approx(0.992)  # 1-γ times 0.8
    assert perturb(0.99, GAMMA, 1.2) == pytest.approx(0.988)
    assert perturb(0.9999, GAMMA, 0.8) == GAMMA.high


def test_mutate_changes_every_named_key_within_its_range_and_keeps_the_rest():
    values = {"lr": 1e-3, "clip": 0.2, "gamma": 0.99, "batch": 256.0}
    for seed in range(50):
        new = mutate(values, SETTINGS, random.Random(seed))
        assert new["batch"] == 256.0
        for key, key_range in SETTINGS.mutate.items():
            assert key_range.low <= new[key] <= key_range.high


def test_the_resample_probability_splits_resamples_from_perturbations():
    rng, values = random.Random(3), {"lr": 1e-3, "clip": 0.2, "gamma": 0.99}
    news = [mutate(values, SETTINGS, rng)["lr"] for _ in range(1000)]
    perturbed = sum(any(math.isclose(v, 1e-3 * f) for f in (0.8, 1.2)) for v in news)
    assert 0.68 < perturbed / 1000 < 0.82  # 1 - 0.25 of them
    never = PbtConfig(mutate=SETTINGS.mutate, resample_probability=0.0)
    assert {round(mutate(values, never, rng)["lr"], 12) for _ in range(50)} == {8e-4, 1.2e-3}


def test_one_seed_gives_one_mutation():
    values = {"lr": 1e-3, "clip": 0.2, "gamma": 0.99}
    assert mutate(values, SETTINGS, random.Random(7)) == mutate(values, SETTINGS,
                                                                random.Random(7))
    assert initial_values(SETTINGS, random.Random(7)) == initial_values(SETTINGS,
                                                                        random.Random(7))


def test_a_key_to_mutate_that_the_run_lacks_is_named():
    with pytest.raises(ConfigError, match="pbt.mutate names gamma"):
        mutate({"lr": 1e-3, "clip": 0.2}, SETTINGS, random.Random(0))
