"""Tiny PettingZoo envs for the multi-agent layer's tests, light enough for any test.

:class:`Relay` is a Parallel env whose agents come and go: ``a`` is done after 2 steps,
``late`` joins after the first step, ``b`` ends at step 3, ``c`` is truncated with ``late``
at step 4 (or, with ``vanish``, is dropped from ``agents`` at step 3 without being marked
done; without ``join``, ``late`` never comes: PettingZoo's ``parallel_to_aec`` takes no new
agents). Each live agent receives ``1 + action`` every step plus ``10 * index`` when it ends,
observes its step count and a number drawn from the env's seeded generator (so seeds
show in trajectories), and may not play action 2 when it is ``b`` (the mask is in infos).
"""
from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

SEATS = ("a", "b", "c", "late")
ENDS = {"a": 2, "b": 3, "c": 4, "late": 4}  # the step after which each one's match ends


class Relay(ParallelEnv):
    """See the module."""

    metadata = {"name": "relay_v0"}

    def __init__(self, vanish: bool = False, join: bool = True) -> None:
        self.possible_agents = list(SEATS)
        self.vanish, self.join = vanish, join
        self.seeds_seen: list[int | None] = []
        self.t = 0
        self.rng = np.random.default_rng()

    def observation_space(self, agent: str) -> spaces.Space:
        return spaces.Box(-np.inf, np.inf, (2,), np.float32)

    def action_space(self, agent: str) -> spaces.Space:
        return spaces.Discrete(3)

    def _obs(self, agent: str) -> np.ndarray:
        return np.array([self.t, self.rng.random()], dtype=np.float32)

    def _info(self, agent: str) -> dict[str, Any]:
        return {"action_mask": np.array([1, 1, 0 if agent == "b" else 1], dtype=np.int8)}

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        self.seeds_seen.append(seed)
        self.rng = np.random.default_rng(seed)
        self.t = 0
        self.agents = ["a", "b", "c"]
        return ({a: self._obs(a) for a in self.agents}, {a: self._info(a) for a in self.agents})

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        assert set(actions) == set(self.agents), (actions, self.agents)
        self.t += 1
        rewards = {a: 1.0 + float(actions[a]) for a in self.agents}
        ended = {a for a in self.agents if ENDS[a] <= self.t}
        for agent in ended:
            rewards[agent] += 10.0 * SEATS.index(agent)
        terminations = {a: a in ended and a in ("a", "b") for a in self.agents}
        truncations = {a: a in ended and a in ("c", "late") for a in self.agents}
        if self.vanish and self.t >= 3 and "c" in self.agents:
            ended.add("c")
            truncations["c"] = False
        obs = {a: self._obs(a) for a in self.agents}
        infos = {a: self._info(a) for a in self.agents}
        self.agents = [a for a in self.agents if a not in ended]
        if self.vanish and "c" in obs and self.t >= 3:
            del obs["c"], rewards["c"], terminations["c"], truncations["c"], infos["c"]
        if self.t == 1 and self.join:
            self.agents.append("late")
            obs["late"], infos["late"] = self._obs("late"), self._info("late")
        return obs, rewards, terminations, truncations, infos


def relay(vanish: bool = False, join: bool = True) -> Relay:
    """A :class:`Relay` (the ``module:function`` form names this)."""
    return Relay(vanish, join)


def random_legal(masks: dict[str, np.ndarray], seats: tuple[str, ...],
                 rng: np.random.Generator) -> dict[str, np.ndarray]:
    """A uniformly random legal move for each seat of each env (0 where none is legal: the
    seat does not act there)."""
    actions = {}
    for seat in seats:
        mask = masks[seat]
        choice = np.zeros(len(mask), dtype=np.int64)
        for n, row in enumerate(mask):
            legal = np.flatnonzero(row)
            if legal.size:
                choice[n] = rng.choice(legal)
        actions[seat] = choice
    return actions


class _Breaks(Relay):
    """A :class:`Relay` that raises at its second step while :attr:`armed` (once: the raise
    disarms it, so the game made again plays on)."""

    armed = False

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        if _Breaks.armed and self.t == 1:
            _Breaks.armed = False
            raise RuntimeError("the relay broke (a test's fault)")
        return super().step(actions)


def breaking_relay() -> Relay:
    """A Relay that breaks at its second step once a test arms it (``module:function``)."""
    return _Breaks()
