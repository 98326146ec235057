"""Benchmark-only envs, imported by id as ``bench_envs:<Id>`` (benchmarks/ on PYTHONPATH).

- ``StragglerCartPole-v0``: CartPole that sleeps ``HPCRL_BENCH_SLOW_SECONDS`` per step on the
  ranks listed in ``HPCRL_BENCH_SLOW_RANKS`` (by the launcher's PMI_RANK).
- ``StampedCartPole-v0``: CartPole that writes the wall-clock time of its first step to
  ``$HPCRL_BENCH_STAMP_DIR/<rank>``, for start-up measurements.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import gymnasium as gym
from gymnasium.envs.classic_control.cartpole import CartPoleEnv


class StragglerCartPole(CartPoleEnv):
    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        slow_ranks = os.environ.get("HPCRL_BENCH_SLOW_RANKS", "").split(",")
        slow = os.environ.get("PMI_RANK", "") in slow_ranks
        self.delay = float(os.environ.get("HPCRL_BENCH_SLOW_SECONDS", "0")) if slow else 0.0

    def step(self, action):
        if self.delay:
            time.sleep(self.delay)
        return super().step(action)


class StampedCartPole(CartPoleEnv):
    def step(self, action):
        folder = os.environ.get("HPCRL_BENCH_STAMP_DIR")
        if folder:
            stamp = Path(folder) / os.environ.get("PMI_RANK", "0")
            if not stamp.exists():
                stamp.write_text(repr(time.time()))
        return super().step(action)


gym.register("StragglerCartPole-v0", entry_point=StragglerCartPole, max_episode_steps=500)
gym.register("StampedCartPole-v0", entry_point=StampedCartPole, max_episode_steps=500)
