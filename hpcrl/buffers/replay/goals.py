"""Goal-conditioned envs for hindsight replay: their observation keys and their reward.

A goal-conditioned env in Gymnasium-Robotics' form observes a ``Dict`` with the keys
``observation``, ``achieved_goal`` and ``desired_goal`` and defines
``compute_reward(achieved_goal, desired_goal, info)``, which takes batches of goals
(``[B, *goal_shape]``) and returns one reward per row. Hindsight replay
(:mod:`hpcrl.buffers.replay.her`) needs three things from it, each here:

- :func:`goal_env_problem`: whether an env is such an env, as a message naming the fix;
- :class:`GoalCodec`: where the goals sit in a carried ``Dict`` observation (one row of
  bytes per observation, :mod:`hpcrl.envs.obs_format`), to read achieved goals and write
  desired goals in place;
- :class:`GoalRewards`: the env's ``compute_reward`` (and ``compute_terminated`` when the
  env defines one), called once per batch on the learner, from one env instance of its own.

Infos are not stored in the replay: ``compute_reward`` receives a list of empty dicts, one
per row, as Stable-Baselines3 passes them by default. An env whose reward needs its infos
cannot be relabelled here.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from hpcrl.envs.make import make_env
from hpcrl.envs.obs_format import ObsFormat
from hpcrl.sections.schema import EnvConfig

GOAL_KEYS = ("observation", "achieved_goal", "desired_goal")


def _space_problem(env_id: str, space: gym.Space | None) -> str | None:
    if not isinstance(space, gym.spaces.Dict) or not set(GOAL_KEYS) <= set(space.spaces):
        return (f"config key 'replay.her_strategy' relabels goals, which needs a goal-"
                f"conditioned env observing a Dict with the keys {', '.join(GOAL_KEYS)} (as "
                f"Gymnasium-Robotics' envs do); env '{env_id}' observes {space}; use such an "
                f"env, or set replay.her_strategy=none")
    achieved, desired = space["achieved_goal"], space["desired_goal"]
    if not (isinstance(achieved, gym.spaces.Box) and isinstance(desired, gym.spaces.Box)
            and achieved.shape == desired.shape):
        return (f"config key 'replay.her_strategy': env '{env_id}' observes achieved_goal "
                f"{achieved} and desired_goal {desired}; relabelling puts achieved goals in "
                f"the place of desired ones, so both must be Box spaces of one shape")
    return None


def goal_env_problem(config: EnvConfig, space: gym.Space | None) -> str | None:
    """Why the env of ``config`` (observing ``space``) cannot be relabelled, or None: a
    ``Dict`` with the three goal keys, goals of one shape, and a ``compute_reward`` that
    gives one reward per row of a batch."""
    problem = _space_problem(config.id, space)
    if problem:
        return problem
    try:
        rewards = GoalRewards(config)
    except TypeError as err:
        return str(err)
    assert isinstance(space, gym.spaces.Dict)  # _space_problem found none
    try:
        probe = np.stack([space["achieved_goal"].sample() for _ in range(2)])
        rewards.rewards(probe, probe[::-1].copy())
    except (TypeError, ValueError) as err:
        return (f"config key 'replay.her_strategy': env '{config.id}''s compute_reward failed "
                f"on a batch of 2 goals ({err}); hindsight replay calls it on whole batches "
                f"(achieved_goal [B, ...], desired_goal [B, ...], a list of B info dicts), "
                f"as Gymnasium-Robotics' envs accept: make it vectorised")
    finally:
        rewards.close()
    return None


class GoalCodec:
    """Reads and writes the goal keys of carried ``Dict`` observations ``[B, nbytes]``."""

    def __init__(self, fmt: ObsFormat) -> None:
        keys = {name: (sub, offset) for name, sub, offset in fmt.keys}
        missing = [k for k in GOAL_KEYS if k not in keys]
        if missing:
            raise ValueError(f"observations lack the goal keys {missing}")
        self.fmt = fmt
        self._keys = {name: keys[name] for name in ("achieved_goal", "desired_goal")}

    def read(self, rows: np.ndarray, key: str) -> np.ndarray:
        """Goals ``[B, *goal_shape]`` (float32) of key ``key`` in ``rows``."""
        sub, offset = self._keys[key]
        raw = np.ascontiguousarray(rows[:, offset:offset + sub.nbytes])
        return raw.view(sub.dtype).reshape((-1,) + sub.shape).astype(np.float32, copy=False)

    def write(self, rows: np.ndarray, key: str, goals: np.ndarray) -> None:
        """Put ``goals`` ``[B, *goal_shape]`` as key ``key`` of ``rows``, in place."""
        sub, offset = self._keys[key]
        packed = np.ascontiguousarray(goals.reshape(len(goals), -1).astype(sub.dtype))
        rows[:, offset:offset + sub.nbytes] = packed.view(np.uint8)


class GoalRewards:
    """The reward (and, where the env defines it, the termination) of goals, in batches.

    Holds one env of ``config`` for its ``compute_reward``, taken from the unwrapped env
    (wrappers change observations, not the task's reward of goals).
    """

    def __init__(self, config: EnvConfig) -> None:
        self.env = make_env(config)
        base = self.env.unwrapped
        reward = getattr(base, "compute_reward", None)
        if not callable(reward):
            self.env.close()
            raise TypeError(f"config key 'replay.her_strategy': env '{config.id}' has no "
                            f"compute_reward(achieved_goal, desired_goal, info), which "
                            f"hindsight replay needs to reward the goals it substitutes; "
                            f"define it on the env, or set replay.her_strategy=none")
        self._reward: Callable[..., Any] = reward
        terminated = getattr(base, "compute_terminated", None)
        self._terminated = terminated if callable(terminated) else None

    @property
    def defines_termination(self) -> bool:
        """Whether the env defines ``compute_terminated`` (relabelled rows then get their
        termination from it)."""
        return self._terminated is not None

    def _infos(self, n: int) -> list[dict[str, Any]]:
        return [{} for _ in range(n)]

    def rewards(self, achieved: np.ndarray, desired: np.ndarray) -> np.ndarray:
        """``compute_reward`` of each row, ``[B]`` float32."""
        out = np.asarray(self._reward(achieved, desired, self._infos(len(achieved))),
                         np.float32)
        if out.shape != (len(achieved),):
            raise ValueError(f"compute_reward returned shape {out.shape} for {len(achieved)} "
                             f"rows, not one reward per row")
        return out

    def terminated(self, achieved: np.ndarray, desired: np.ndarray) -> np.ndarray:
        """``compute_terminated`` of each row, ``[B]`` bool (a scalar answer, as
        Gymnasium-Robotics' envs give, holds for every row)."""
        assert self._terminated is not None
        out = np.asarray(self._terminated(achieved, desired, self._infos(len(achieved))), bool)
        return np.broadcast_to(out, (len(achieved),))

    def close(self) -> None:
        """Close the env held for its reward."""
        self.env.close()
