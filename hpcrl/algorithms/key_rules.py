"""Range rules of config keys: one wording for a bound and for a key that nothing reads.

An algorithm states the rules of its own section's keys on its class
(:attr:`~hpcrl.algorithms.algorithm.Algorithm.section_rules`: ``(leaf, rule)`` pairs,
each rule given the key's full name and its value); the config's checks use the same
primitives (:mod:`hpcrl.config.checks`), so every refusal of a bound reads alike."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: one range rule of a section: (the key's leaf, its test given the key's full name)
Rule = tuple[str, Callable[[str, Any], "str | None"]]


def positive(key: str, value: float, strict: bool = True) -> str | None:
    """The refusal of ``key`` unless ``value`` > 0 (>= 0 when not ``strict``), or None."""
    if (value <= 0) if strict else (value < 0):
        bound = "> 0" if strict else ">= 0"
        return f"config key '{key}' must be {bound}, got {value}"
    return None


def not_negative(key: str, value: float) -> str | None:
    """The refusal of ``key`` unless ``value`` >= 0, or None."""
    return positive(key, value, strict=False)


def in_unit(key: str, value: float, low_open: bool = False) -> str | None:
    """The refusal of ``key`` unless ``value`` lies in [0, 1] ((0, 1] with ``low_open``)."""
    if not (0.0 < value <= 1.0 if low_open else 0.0 <= value <= 1.0):
        interval = "(0, 1]" if low_open else "[0, 1]"
        return f"config key '{key}' must lie in {interval}, got {value}"
    return None


def clip_or_null(key: str, value: float | None) -> str | None:
    """The refusal of a clip ``key`` unless ``value`` > 0 or None (no clipping)."""
    if value is not None and value <= 0:
        return f"config key '{key}' must be > 0 (or null for no clipping), got {value}"
    return None


def below_one(key: str, value: float) -> str | None:
    """The refusal of a mixing weight ``key`` unless ``value`` lies in [0, 1) (1 would
    never move)."""
    if not 0.0 <= value < 1.0:
        return f"config key '{key}' must lie in [0, 1) (1 would never move), got {value}"
    return None


def unread(section: str, values: object, keys: list[str], reader: str, fix: str
           ) -> list[str]:
    """The refusal of the first of ``keys`` set away from its default while ``reader``, the
    feature that reads them, is off (a key that would be silently ignored)."""
    defaults = type(values)()
    unread = [key for key in keys if getattr(values, key) != getattr(defaults, key)]
    return [f"config key '{section}.{unread[0]}' is read by {reader} only; {fix}, or drop "
            f"the key"] if unread else []


def rule_problems(section: str, values: object, rules: tuple[Rule, ...]) -> list[str]:
    """The refusals of ``rules`` on the keys of ``values`` (the section ``section``, e.g.
    ``algo.ppo``) that it holds."""
    problems = [rule(f"{section}.{leaf}", getattr(values, leaf))
                for leaf, rule in rules if hasattr(values, leaf)]
    return [p for p in problems if p]
