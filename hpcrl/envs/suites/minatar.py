"""MinAtar's miniature Atari games (``minatar``): 10x10 frames of boolean channels.

``MinAtar/Breakout-v1`` and the others are registered only when
``minatar.gym.register_envs()`` is called, which hpcrl does for an id of the suite.
"""
from __future__ import annotations

import re

import gymnasium as gym

from hpcrl.envs.suites.suite import SUITES, Suite


def _register() -> None:
    import minatar.gym

    if "MinAtar/Breakout-v1" not in gym.registry:
        minatar.gym.register_envs()


MINATAR = Suite(
    name="MinAtar", extra="minatar", packages=("minatar",), modules=("minatar",),
    ids=re.compile(r"^MinAtar/"), register=_register, example="MinAtar/Breakout-v1")
SUITES.add(MINATAR)
