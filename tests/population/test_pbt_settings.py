"""PbtConfig: Ray Tune's defaults, and problems that name the key and the fix."""
from __future__ import annotations

import pytest

from hpcrl.errors import ConfigError
from hpcrl.population.settings import check_settings
from hpcrl.sections.pbt_section import KeyRange, PbtConfig

LR = {"algo.lr": KeyRange(1e-5, 1e-2, "log")}


def test_defaults_are_ray_tunes_and_valid_once_a_key_is_named():
    settings = PbtConfig(mutate=LR)
    assert (settings.bottom_quantile, settings.top_quantile) == (0.25, 0.25)
    assert settings.resample_probability == 0.25
    assert settings.perturb_factors == (0.8, 1.2)
    assert settings.objective == "mean_return"
    assert check_settings(settings) is settings


def test_the_fields_are_documented():
    from dataclasses import fields
    assert all(f.metadata.get("doc") for f in fields(PbtConfig))
    assert all(f.metadata.get("doc") for f in fields(KeyRange))


@pytest.mark.parametrize("key_range, words", [
    (KeyRange(1e-2, 1e-5, "log"), ["pbt.mutate.algo.lr", "must be below high", "swap"]),
    (KeyRange(0.0, 1e-2, "log"), ["pbt.mutate.algo.lr", "low > 0", "scale: linear"]),
    (KeyRange(-1.0, 1e-2, "log"), ["low > 0"]),
    (KeyRange(1e-5, 1e-2, "cubic"), ["scale is 'cubic'", "log, linear, log_complement"]),
    (KeyRange(0.9, 1.0, "log_complement"), ["high < 1"]),
    (KeyRange(0.1, float("inf"), "linear"), ["finite"]),
])
def test_a_bad_range_names_its_key_and_the_fix(key_range, words):
    found = PbtConfig(mutate={"algo.lr": key_range}).problems()
    assert len(found) == 1
    assert all(word in found[0] for word in words), found


def test_overlapping_quantiles_are_refused_with_the_fix():
    found = PbtConfig(mutate=LR, bottom_quantile=0.6, top_quantile=0.5).problems()
    assert len(found) == 1 and "overlap" in found[0] and "sum at most 1" in found[0]
    assert "pbt.top_quantile" in PbtConfig(mutate=LR, top_quantile=0).problems()[0]


@pytest.mark.parametrize("change, key", [
    ({"members": 1}, "pbt.members"),
    ({"interval_env_steps": 0}, "pbt.interval_env_steps"),
    ({"objective": ""}, "pbt.objective"),
    ({"resample_probability": 1.5}, "pbt.resample_probability"),
    ({"perturb_factors": (1.0, 1.0)}, "pbt.perturb_factors"),
    ({"perturb_factors": (0.8, -1.2)}, "pbt.perturb_factors"),
    ({"absolute_gap": -1.0}, "pbt.absolute_gap"),
    ({"relative_gap": float("nan")}, "pbt.relative_gap"),
    ({"mutate": {}}, "pbt.mutate is empty"),
])
def test_each_bad_value_names_its_key(change, key):
    settings = PbtConfig(**{"mutate": LR, **change})
    found = settings.problems()
    assert len(found) == 1 and key in found[0], found
    with pytest.raises(ConfigError, match=key.split()[0].replace(".", r"\.")):
        check_settings(settings)


def test_every_problem_is_listed_at_once():
    settings = PbtConfig(members=0, mutate={"a": KeyRange(1, 0), "b": KeyRange(0, 1, "log")})
    assert len(settings.problems()) == 3
