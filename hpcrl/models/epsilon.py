"""Epsilon-greedy schedules of DQN collectors (plain Python: ``hpcrl plan`` shows them
without importing torch)."""
from __future__ import annotations


def linear_epsilon(initial: float, final: float, fraction: float, progress: float) -> float:
    """``initial`` decaying linearly to ``final`` over the first ``fraction`` of training."""
    if fraction <= 0 or progress >= fraction:
        return final
    return initial + (final - initial) * progress / fraction


def collector_epsilon(index: int, count: int, base: float, alpha: float) -> float:
    """Ape-X's fixed epsilon of collector ``index`` of ``count``: ``base ** (1 + alpha * index
    / (count - 1))``, from ``base`` for the first collector to ``base ** (1 + alpha)`` for the
    last (``base`` when there is one)."""
    if count <= 1:
        return base
    return base ** (1.0 + alpha * index / (count - 1))
