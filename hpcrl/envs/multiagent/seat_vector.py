"""N multi-agent envs of one game stepped in lock step: what a collector will hold.

Every step gives per-seat arrays over the envs, ``[N, ...]``, in the same convention as
hpcrl's single-agent vector envs (same-step reset): ``acting[n, s]`` says whether seat ``s``
of env ``n`` acts now, with its observation ``obs[seat][n]`` and legal moves
``masks[seat][n]``; ``stepped[n, s]`` says whether the step of that seat's last action
completed in this call, with ``rewards``, ``terminated`` and ``truncated`` ``[n, s]`` saying
how (and ``final_obs[seat][n]`` where it ended the seat's match). Entries outside those
masks are zeros. The envs whose match ended were reset with their next match's seed in the
same call: their acting seats and observations are the new match's, and ``matches`` holds
the results of the finished ones.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from hpcrl.envs.multiagent.matches import MatchResult, MatchTracker, OutcomeRule, zero_sum_outcomes
from hpcrl.envs.multiagent.named_envs import MultiAgentEnvError, make_seat_env
from hpcrl.envs.multiagent.seats import SeatEnv, SeatSpace, SeatStep


@dataclass
class VectorStep:
    """One lock step of N envs (see the module): ``[N, seats]`` flags and rewards, per-seat
    observations, masks (seats with a Discrete action) and final observations, and the
    matches that ended."""

    acting: np.ndarray
    obs: dict[str, np.ndarray]
    masks: dict[str, np.ndarray]
    stepped: np.ndarray
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    final_obs: dict[str, np.ndarray]
    matches: list[MatchResult] = field(default_factory=list)

    @property
    def dones(self) -> np.ndarray:
        """``[N, seats]``: the seat's match ended (terminated or truncated)."""
        return self.terminated | self.truncated


def obs_layout(seat: str, space: SeatSpace) -> tuple[tuple[int, ...], np.dtype]:
    """The shape and dtype of one observation of ``seat`` in the per-seat arrays; array
    observations only (Box, Discrete, MultiDiscrete, MultiBinary)."""
    observed = space.observation_space
    if isinstance(observed, gym.spaces.Discrete):
        return (), np.dtype(np.int64)
    if isinstance(observed, (gym.spaces.Box, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
        return tuple(observed.shape), np.dtype(observed.dtype)
    raise MultiAgentEnvError(f"seat '{seat}' observes {observed}; the multi-agent layer takes "
                             f"array observations (a Dict only as {{'observation', "
                             f"'action_mask'}}): flatten it with a PettingZoo wrapper")


class SeatVector:
    """N :class:`~hpcrl.envs.multiagent.seats.SeatEnv` of one game stepped together, with a
    :class:`~hpcrl.envs.multiagent.matches.MatchTracker` of the matches they finish."""

    def __init__(self, envs: Sequence[SeatEnv],
                 outcome: OutcomeRule | None = zero_sum_outcomes) -> None:
        if not envs:
            raise ValueError("a SeatVector needs at least one env")
        self.envs = list(envs)
        self.seats = envs[0].seats
        self.spaces = envs[0].spaces
        if any(env.seats != self.seats for env in envs):
            raise ValueError(f"the envs of a SeatVector must have the same seats: "
                             f"{sorted({env.seats for env in envs})}")
        self.layouts = {seat: obs_layout(seat, space) for seat, space in self.spaces.items()}
        self.tracker = MatchTracker(self.seats, outcome)

    @property
    def num_envs(self) -> int:
        """N, the number of envs."""
        return len(self.envs)

    def reset(self) -> VectorStep:
        """Start every env's next match."""
        return self._gather([env.reset() for env in self.envs])

    def step(self, actions: Mapping[str, np.ndarray]) -> VectorStep:
        """Step every env with ``actions[seat][n]`` for each seat acting in env ``n`` (the
        other entries are ignored; a seat that acts nowhere needs no entry: one that acts
        somewhere and has none is refused by its env, with its name)."""
        steps = []
        for n, env in enumerate(self.envs):
            steps.append(env.step({seat: actions[seat][n] for seat in env.acting
                                   if seat in actions}))
        return self._gather(steps)

    def returns(self) -> np.ndarray:
        """``[N, seats]``: each seat's return so far in its env's match under way."""
        out = np.zeros((self.num_envs, len(self.seats)), dtype=np.float64)
        for n, env in enumerate(self.envs):
            for seat, value in env.returns.items():
                out[n, self.seats.index(seat)] = value
        return out

    def state(self) -> dict[str, Any]:
        """Plain data for a checkpoint: each env's seed sequence and the tally of matches."""
        return {"envs": [env.state() for env in self.envs], "tracker": self.tracker.state()}

    def load_state(self, state: dict[str, Any]) -> VectorStep:
        """Continue from :meth:`state`'s data: every env starts the next match of its
        sequence (the matches under way are abandoned, never recorded)."""
        if len(state["envs"]) != self.num_envs:
            raise ValueError(f"the checkpoint holds {len(state['envs'])} multi-agent envs but "
                             f"this vector has {self.num_envs}: env.num_envs or the scheme "
                             f"changed")
        self.tracker.load_state(state["tracker"])
        return self._gather([env.load_state(s) for env, s in zip(self.envs, state["envs"],
                                                                 strict=True)])

    def close(self) -> None:
        """Close every env."""
        for env in self.envs:
            env.close()

    def _arrays(self) -> VectorStep:
        """A VectorStep of zeros."""
        n, s = self.num_envs, len(self.seats)
        obs = {seat: np.zeros((n, *shape), dtype) for seat, (shape, dtype) in self.layouts.items()}
        final = {seat: np.zeros_like(array) for seat, array in obs.items()}
        masks = {seat: np.zeros((n, space.mask_size), dtype=bool)
                 for seat, space in self.spaces.items() if space.mask_size is not None}
        flags = np.zeros((n, s), dtype=bool)
        return VectorStep(flags, obs, masks, flags.copy(), np.zeros((n, s), dtype=np.float32),
                          flags.copy(), flags.copy(), final)

    def _gather(self, steps: list[SeatStep]) -> VectorStep:
        out = self._arrays()
        column = {seat: k for k, seat in enumerate(self.seats)}
        for n, step in enumerate(steps):
            for seat in step.acting:
                out.acting[n, column[seat]] = True
                out.obs[seat][n] = step.obs[seat]
                mask = step.masks[seat]
                if mask is not None:
                    out.masks[seat][n] = mask
            for seat, result in step.results.items():
                k = column[seat]
                out.stepped[n, k] = True
                out.rewards[n, k] = result.reward
                out.terminated[n, k] = result.terminated
                out.truncated[n, k] = result.truncated
                if result.final_obs is not None:
                    out.final_obs[seat][n] = result.final_obs
            if step.ended is not None:
                out.matches.append(self.tracker.record(step.ended))
        return out


def make_seat_vector(name: str, num_envs: int, seed: int, first_index: int = 0,
                     outcome: OutcomeRule | None = zero_sum_outcomes,
                     **kwargs: Any) -> SeatVector:
    """``num_envs`` envs ``name`` (:mod:`~hpcrl.envs.multiagent.named_envs`) of global indices
    ``first_index ..``, made with ``kwargs``, as one :class:`SeatVector`."""
    return SeatVector([make_seat_env(name, seed, first_index + i, **kwargs)
                       for i in range(num_envs)], outcome)
