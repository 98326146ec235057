"""Test-only envs, imported by id as ``hpcrl_testenvs:<Id>`` (tests/mpi is on PYTHONPATH).

The rank an env runs on comes from the launcher's ``PMI_RANK``, so a test can make the
envs of one rank slow (a straggler) or crash, and leave every other rank alone.
"""
from __future__ import annotations

import os
import time

import gymnasium as gym
from gymnasium.envs.classic_control.cartpole import CartPoleEnv


def _ranks(var: str) -> set[str]:
    return {r for r in os.environ.get(var, "").split(",") if r}


class SlowCartPole(CartPoleEnv):
    """CartPole that sleeps ``HPCRL_TEST_SLOW_SECONDS`` per step on ``HPCRL_TEST_SLOW_RANKS``."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        slow = os.environ.get("PMI_RANK", "") in _ranks("HPCRL_TEST_SLOW_RANKS")
        self.delay = float(os.environ.get("HPCRL_TEST_SLOW_SECONDS", "0.002")) if slow else 0.0

    def step(self, action):
        if self.delay:
            time.sleep(self.delay)
        return super().step(action)


class CrashingCartPole(CartPoleEnv):
    """CartPole whose step raises after ``HPCRL_TEST_CRASH_AFTER`` steps on the crash ranks."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.crash = os.environ.get("PMI_RANK", "") in _ranks("HPCRL_TEST_CRASH_RANKS")
        self.left = int(os.environ.get("HPCRL_TEST_CRASH_AFTER", "100"))

    def step(self, action):
        if self.crash:
            self.left -= 1
            if self.left < 0:
                raise RuntimeError("test env crashed on purpose")
        return super().step(action)


gym.register("SlowCartPole-v0", entry_point=SlowCartPole, max_episode_steps=500)
gym.register("CrashingCartPole-v0", entry_point=CrashingCartPole, max_episode_steps=500)
