"""A collector's envs in groups that take turns (``scheme.env_groups``).

A collector that waits for its actions at every step leaves its envs idle meanwhile, and
its acting idle while the envs step. Cut into groups, one group's actions can be computed
(on an inference rank, on a GPU, or here while the other group's envs step in their
subprocesses or EnvPool's threads) while another group steps: Sample Factory's
double-buffered sampling. :class:`EnvGroups` holds the groups, each a vector env of its own
over a contiguous slice of the collector's envs; env ``i`` of the collector is always the
same env (same global index, seed and generator) whatever the number of groups, so the
rollout does not depend on it.

A group's step can be split in two where its vector env steps outside this thread
(:attr:`EnvGroups.asynchronous`: Gymnasium's ``AsyncVectorEnv``, EnvPool): :meth:`begin`
hands the actions over and returns at once, :meth:`end` waits for what the step returned.
Elsewhere :meth:`begin` steps the group and :meth:`end` returns what it kept.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from hpcrl.envs.vector import reset_seeded, vector_call, vector_set_attr

StepResult = tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]


@dataclass(frozen=True)
class EnvGroup:
    """Group ``index``: the collector's envs ``cols`` (a slice of its columns), stepped
    together as the vector env ``envs``."""

    index: int
    cols: slice
    envs: gym.vector.VectorEnv

    @property
    def size(self) -> int:
        """How many envs the group holds."""
        return self.cols.stop - self.cols.start


def splits_async(envs: gym.vector.VectorEnv) -> bool:
    """Whether ``envs`` steps outside the calling thread, so that a step can be started
    and waited for apart (Gymnasium's ``AsyncVectorEnv`` and hpcrl's EnvPool adapter have
    ``step_async`` / ``step_wait``)."""
    return callable(getattr(envs, "step_async", None)) and \
        callable(getattr(envs, "step_wait", None))


class EnvGroups:
    """The vector envs of a collector's groups, in column order (``groups``: as many vector
    envs as groups, made by the caller for consecutive slices of its envs)."""

    def __init__(self, envs: Sequence[gym.vector.VectorEnv]) -> None:
        if not envs:
            raise ValueError("a collector needs at least one group of envs")
        groups, start = [], 0
        for index, vector in enumerate(envs):
            groups.append(EnvGroup(index, slice(start, start + vector.num_envs), vector))
            start += vector.num_envs
        self.groups: tuple[EnvGroup, ...] = tuple(groups)
        self.num_envs = start
        first = envs[0]
        self.single_observation_space = first.single_observation_space
        self.single_action_space = first.single_action_space
        self.metadata = getattr(first, "metadata", {})
        # each group's step kept between begin() and end() where it is not split
        self._kept: list[StepResult | None] = [None] * len(groups)
        self.reset_infos: list[dict[str, Any]] = [{} for _ in groups]  # of the last reset
        self.asynchronous = all(splits_async(g.envs) for g in groups)

    @staticmethod
    def of(make: Callable[[int, int], gym.vector.VectorEnv], num_envs: int,
           groups: int) -> EnvGroups:
        """``groups`` equal groups of ``num_envs`` envs, group ``g`` made by
        ``make(first, count)`` (its first env's index in the collector, its env count)."""
        if groups < 1 or num_envs % groups:
            raise ValueError(f"{num_envs} envs do not split into {groups} equal groups")
        size = num_envs // groups
        return EnvGroups([make(g * size, size) for g in range(groups)])

    @property
    def only(self) -> gym.vector.VectorEnv | None:
        """The vector env of the one group there is (None with several groups)."""
        return self.groups[0].envs if len(self.groups) == 1 else None

    # -- stepping ------------------------------------------------------------------------
    def begin(self, group: int, actions: np.ndarray) -> None:
        """Start group ``group``'s step with ``actions`` (its envs' rows)."""
        envs = self.groups[group].envs
        if self.asynchronous:
            envs.step_async(actions)  # type: ignore[attr-defined]
        else:
            self._kept[group] = envs.step(actions)

    def end(self, group: int) -> StepResult:
        """What group ``group``'s step returned: observations, rewards, terminated,
        truncated and info, indexed by the group's own envs."""
        if self.asynchronous:
            return self.groups[group].envs.step_wait()  # type: ignore[attr-defined]
        kept = self._kept[group]
        assert kept is not None, f"group {group} was not stepped"
        self._kept[group] = None
        return kept

    # -- what collectors ask of any vector env -------------------------------------------
    def reset(self, *, seed: Sequence[Any], options: Any = None) -> list[Any]:
        """Reset every group with its envs' seeds (one per env, in column order); each
        group's first observations, as its vector env returned them (its info in
        :attr:`reset_infos`)."""
        done = [reset_seeded(g.envs, list(seed[g.cols]), options) for g in self.groups]
        self.reset_infos = [info for _, info in done]
        return [obs for obs, _ in done]

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """``name`` of every env (called with ``args`` when it is a method), in column order."""
        return tuple(v for g in self.groups for v in vector_call(g.envs, name, *args, **kwargs))

    def set_attr(self, name: str, values: Sequence[Any]) -> None:
        """Set ``name`` on every env, one value each in column order."""
        for g in self.groups:
            vector_set_attr(g.envs, name, list(values[g.cols]))

    def close(self, **kwargs: Any) -> None:
        """Close every group's vector env."""
        for g in self.groups:
            g.envs.close(**kwargs)


def resolve_groups(requested: int, num_envs: int, overlapping: bool) -> int:
    """How many groups a collector of ``num_envs`` envs cuts them into: ``requested`` (1
    or more), or for 0 (auto) 2 where acting and stepping can overlap (``overlapping``:
    another process acts, or the envs step outside this thread) and the envs split evenly,
    else 1."""
    if requested > 0:
        return requested
    return 2 if overlapping and num_envs >= 2 and num_envs % 2 == 0 else 1
