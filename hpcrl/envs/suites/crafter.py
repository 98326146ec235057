"""Crafter (``crafter``), Hafner's open-world survival game: ``CrafterReward-v1`` and
``CrafterNoReward-v1``.

Crafter speaks the old Gym API and registers its ids with ``gym`` only (when that is
installed), so hpcrl registers the two ids with Gymnasium itself, on
:class:`CrafterEnv`, its game through the old-API adapter :class:`~hpcrl.envs.old_gym.OldGymEnv`:
64x64 RGB frames (uint8, channels last: the image encoders take them), 17 actions, episodes
of at most 10,000 steps (Gymnasium's time limit, as Crafter registers them). An episode ends
``terminated`` when the player dies and ``truncated`` when its time is up. The step's
``info`` keeps Crafter's ``achievements`` and ``inventory`` (what the Crafter score is
computed from) but not its ``semantic`` map of the whole world, which the agent never sees
and which would otherwise be copied out of every env at every step.

The ``[crafter]`` extra installs ``numba`` beside it: Crafter generates each episode's world
with OpenSimplex noise, which takes 1.6 s an episode in pure Python and 0.09 s compiled
(once a process has compiled it, in 2.7 s).
"""
from __future__ import annotations

import re
from typing import Any

import gymnasium as gym
import numpy as np

from hpcrl.envs.old_gym import OldGymEnv
from hpcrl.envs.suites.suite import SUITES, Suite

CRAFTER_IDS = {"CrafterReward-v1": True, "CrafterNoReward-v1": False}  # id -> rewarded
CRAFTER_STEPS = 10000  # Crafter's own episode length, as its gym registration has it
SEMANTIC, POSITION = "semantic", "player_pos"


class CrafterEnv(OldGymEnv):
    """Crafter's game as a Gymnasium env (see the module docstring).

    ``reward=False`` is ``CrafterNoReward-v1`` (every reward 0, the achievements still
    counted); ``area``, ``view``, ``size`` (the frame's pixels) and ``length`` (an episode
    length of Crafter's own, besides the time limit) are Crafter's ``Env`` arguments.
    """

    def __init__(self, reward: bool = True, area: tuple[int, int] = (64, 64),
                 view: tuple[int, int] = (9, 9), size: tuple[int, int] = (64, 64),
                 length: int | None = None, render_mode: str | None = None) -> None:
        import crafter

        def make(seed: int) -> Any:
            return crafter.Env(area=tuple(area), view=tuple(view), size=tuple(size),
                               reward=reward, length=length, seed=seed)

        super().__init__(make, render_mode)

    def truncated(self, info: dict[str, Any]) -> bool:
        """Crafter's episodes end by death (discount 0) or by its ``length`` (discount 1)."""
        return float(info.get("discount", 0.0)) == 1.0

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """A step of the game; its info without the world's semantic map, and with a copy of
        the player's position (Crafter hands out the array it moves)."""
        obs, reward, terminated, truncated, info = super().step(action)
        info.pop(SEMANTIC, None)
        if POSITION in info:
            info[POSITION] = np.array(info[POSITION])
        return obs, reward, terminated, truncated, info


def _register() -> None:
    import crafter  # noqa: F401  (ImportError when it is missing, before any id is registered)

    for env_id, rewarded in CRAFTER_IDS.items():
        if env_id not in gym.registry:
            gym.register(env_id, entry_point=f"{__name__}:CrafterEnv",
                         max_episode_steps=CRAFTER_STEPS, kwargs={"reward": rewarded})


CRAFTER = Suite(
    name="Crafter", extra="crafter", packages=("crafter", "numba"), modules=("crafter",),
    ids=re.compile("^(" + "|".join(re.escape(i) for i in CRAFTER_IDS) + ")$"),
    register=_register, example="CrafterReward-v1")
SUITES.add(CRAFTER)
