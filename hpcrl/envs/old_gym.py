"""A Gymnasium env around an env of the old Gym API (``gym`` before 0.26).

Old-API envs reset with ``reset() -> obs`` and step with ``step(action) -> (obs, reward,
done, info)``; their seed is given when they are built or through ``seed()``, and their
spaces may be ``gym``'s or duck-typed records with the same fields (Crafter declares
namedtuples when ``gym`` is not installed). :class:`OldGymEnv` turns one into a Gymnasium
env: the spaces become Gymnasium's, ``done`` splits into ``terminated`` and ``truncated``
(:meth:`OldGymEnv.truncated`: by default Gym's ``TimeLimit.truncated`` info key), and
``reset(seed=...)`` builds a fresh env from the seed through the ``make`` it was given, so a
seeded reset replays the same episode, as Gymnasium's contract says.

Shimmy's compatibility wrappers do the same job, but they need the old ``gym`` package
itself, which pins NumPy below 2; this adapter needs no ``gym`` at all.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

MAX_SEED = 2**31 - 1


def gymnasium_space(space: Any) -> gym.Space:
    """The Gymnasium space of an old-Gym (or duck-typed) ``Discrete``, ``Box`` or ``Dict``
    space; a TypeError for any other."""
    if isinstance(space, gym.Space):
        return space
    if hasattr(space, "spaces") and isinstance(space.spaces, dict):
        return gym.spaces.Dict({key: gymnasium_space(sub) for key, sub in space.spaces.items()})
    if hasattr(space, "n"):
        return gym.spaces.Discrete(int(space.n))
    if all(hasattr(space, field) for field in ("low", "high", "shape", "dtype")):
        shape = tuple(int(size) for size in space.shape)
        return gym.spaces.Box(np.broadcast_to(space.low, shape), np.broadcast_to(space.high, shape),
                              shape, np.dtype(space.dtype))
    raise TypeError(f"an old-Gym space of type {type(space).__name__} has no Gymnasium form "
                    f"here (Discrete, Box and Dict do)")


class OldGymEnv(gym.Env):
    """A Gymnasium env playing the old-API env that ``make(seed)`` builds.

    The env is built once to read its spaces (with seed 0) and again at every seeded reset
    and at the first reset (from a seed drawn from the env's own generator, which
    ``reset(seed=...)`` seeds). ``render_mode="rgb_array"`` renders the old env's
    ``render()`` frame.
    """

    metadata: dict[str, Any] = {"render_modes": ["rgb_array"]}

    def __init__(self, make: Callable[[int], Any], render_mode: str | None = None) -> None:
        self._make = make
        self.old_env = make(0)
        self._started = False
        self.observation_space = gymnasium_space(self.old_env.observation_space)
        self.action_space = gymnasium_space(self.old_env.action_space)
        self.render_mode = render_mode

    def truncated(self, info: dict[str, Any]) -> bool:
        """Whether a step that ended its episode ran out of time (``truncated``) rather than
        reached an end of the task (``terminated``), from the step's ``info``."""
        return bool(info.get("TimeLimit.truncated", False))

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[Any, dict[str, Any]]:
        """A new episode; with ``seed`` (or the first time) in an env built afresh from a
        seed of this env's generator."""
        super().reset(seed=seed)
        if seed is not None or not self._started:
            self.close()
            self.old_env = self._make(int(self.np_random.integers(MAX_SEED)))
            self._started = True
        return self.old_env.reset(), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """One step of the old env, its ``done`` split into terminated and truncated."""
        obs, reward, done, info = self.old_env.step(action)
        truncated = bool(done) and self.truncated(info)
        return obs, float(reward), bool(done) and not truncated, truncated, info

    def render(self) -> Any:
        """The old env's ``render()`` frame (``render_mode="rgb_array"``), else None."""
        return self.old_env.render() if self.render_mode == "rgb_array" else None

    def close(self) -> None:
        """Close the old env, where it has a ``close``."""
        close = getattr(self.old_env, "close", None)
        if callable(close):
            close()
