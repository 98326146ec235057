"""Learning algorithms: each turns batches into gradients and applies gradients."""
from __future__ import annotations

from torch import nn

from hpcrl.config.schema import AlgoConfig
from hpcrl.core.algorithms.a2c import A2C
from hpcrl.core.algorithms.base import Algorithm
from hpcrl.core.algorithms.impala import IMPALA
from hpcrl.core.algorithms.ppo import PPO
from hpcrl.core.reducer import Reducer

ALGORITHMS: dict[str, type[Algorithm]] = {"ppo": PPO, "a2c": A2C, "impala": IMPALA}


def make_algorithm(actor: nn.Module, config: AlgoConfig, reducer: Reducer | None = None,
                   on_nonfinite: str = "stop") -> Algorithm:
    """The algorithm named by ``config.name`` over ``actor``; ``on_nonfinite`` is
    ``train.on_nonfinite`` (what a NaN/inf loss term or gradient does)."""
    return ALGORITHMS[config.name](actor, config, reducer, on_nonfinite)


__all__ = ["A2C", "ALGORITHMS", "Algorithm", "IMPALA", "PPO", "make_algorithm"]
