"""The one interface PettingZoo's Parallel and AEC envs are adapted to: a fixed set of seats.

A *seat* is one of the env's ``possible_agents``. After every reset or step an adapter says,
for each seat: whether it acts now (with its observation and legal moves), and whether the
step of its last action is complete (with the reward it received since that action, summed
over every env step in between, other seats' turns included, and whether it ended the
seat's match). That is the shape of a single-agent step seen from each seat, so a collector
can keep one trajectory per seat: a seat absent from the env's ``agents`` neither acts nor
gets a step, and each seat's final step is reported once, with its terminal reward.

When no seat can act any more the match is over: the adapter reports it
(:class:`EpisodeEnd`) and resets the env with the next match's seed
(:mod:`~hpcrl.envs.multiagent.seeding`) in the same call, as hpcrl's single-agent vector
envs reset on the step that ends an episode. Subclasses only drive the env and report what
it does through :meth:`SeatEnv._receive`, :meth:`SeatEnv._seat_ready` and
:meth:`SeatEnv._seat_ends`.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from hpcrl.envs.multiagent.seeding import EpisodeSeeds

MASK_KEY = "action_mask"


@dataclass(frozen=True)
class SeatSpace:
    """A seat's observation space (the env's, less the action mask that a Dict observation
    ``{'observation', 'action_mask'}`` carries) and action space."""

    observation_space: gym.Space
    action_space: gym.Space
    mask_in_obs: bool  # the env's observations are {'observation', 'action_mask'} dicts

    @property
    def mask_size(self) -> int | None:
        """The number of moves a legal-move mask covers (a Discrete action), else None."""
        if isinstance(self.action_space, gym.spaces.Discrete):
            return int(self.action_space.n)
        return None


def seat_space(observation_space: gym.Space, action_space: gym.Space) -> SeatSpace:
    """The :class:`SeatSpace` of a seat of these spaces; a Dict observation space with an
    ``action_mask`` key carries the mask beside the observation (PettingZoo's classic games)."""
    if isinstance(observation_space, gym.spaces.Dict) and MASK_KEY in observation_space.spaces:
        return SeatSpace(observation_space["observation"], action_space, True)
    return SeatSpace(observation_space, action_space, False)


def split_observation(space: SeatSpace, obs: Any, info: Mapping[str, Any] | None
                      ) -> tuple[Any, np.ndarray | None]:
    """A seat's observation and its legal moves as a bool mask: from the observation's
    ``action_mask`` or the info's (OpenSpiel through shimmy), all moves legal when the env
    gives none; None for actions other than Discrete (no mask applies)."""
    mask: Any = None
    if space.mask_in_obs:
        mask, obs = obs[MASK_KEY], obs["observation"]
    elif info is not None and MASK_KEY in info:
        mask = info[MASK_KEY]
    size = space.mask_size
    if size is None:
        return obs, None
    if mask is None:
        return obs, np.ones(size, dtype=bool)
    return obs, np.asarray(mask).astype(bool).reshape(size)


@dataclass(frozen=True)
class SeatResult:
    """How the step of a seat's last action turned out: the reward the seat received since
    that action and whether its match ended for it (then its final observation, for
    bootstrapping a truncated one; None where the env removed the seat without one)."""

    reward: float
    terminated: bool = False
    truncated: bool = False
    final_obs: Any = None


@dataclass(frozen=True)
class EpisodeEnd:
    """A finished match of one env: who took part, each one's return, the reward each received
    in its final step (what decides a game's outcome), how it ended for each, and the number
    of env steps (turns, in a turn-based game) it took."""

    env_index: int
    episode: int
    seed: int
    seats: tuple[str, ...]
    returns: dict[str, float]
    final_rewards: dict[str, float]
    terminated: dict[str, bool]
    truncated: dict[str, bool]
    length: int


@dataclass(frozen=True)
class SeatStep:
    """What one env says after a reset or step: the seats that act now, each one's observation
    and legal moves (None where its action is not Discrete), the seats whose last action's step
    completed (:class:`SeatResult`), and the match that ended in this call, if one did (the
    acting seats are then the next match's)."""

    acting: tuple[str, ...]
    obs: dict[str, Any]
    masks: dict[str, np.ndarray | None]
    results: dict[str, SeatResult] = field(default_factory=dict)
    ended: EpisodeEnd | None = None


@dataclass
class _Match:
    """The bookkeeping of the match under way."""

    episode: int
    seed: int
    seats: list[str] = field(default_factory=list)  # in the order they appeared
    returns: dict[str, float] = field(default_factory=dict)
    final_rewards: dict[str, float] = field(default_factory=dict)
    terminated: dict[str, bool] = field(default_factory=dict)
    truncated: dict[str, bool] = field(default_factory=dict)
    length: int = 0

    def join(self, seat: str) -> None:
        if seat not in self.returns:
            self.seats.append(seat)
            self.returns[seat] = 0.0


class SeatEnv(ABC):
    """A PettingZoo env seen as a fixed set of seats (its ``possible_agents``); see the module.

    ``env_index`` is the env's global index in the job and ``seed`` the job's env seed: match
    ``k`` is reset with :func:`~hpcrl.envs.multiagent.seeding.episode_seed`. Subclasses
    implement :meth:`_begin` (reset the env) and :meth:`_advance` (apply the acting seats'
    actions) for their API.
    """

    def __init__(self, env: Any, seed: int, env_index: int = 0) -> None:
        self.env = env
        self.seats: tuple[str, ...] = tuple(env.possible_agents)
        self.spaces = {seat: seat_space(env.observation_space(seat), env.action_space(seat))
                       for seat in self.seats}
        self.seeds = EpisodeSeeds(seed, env_index)
        self._match = _Match(-1, seed + env_index)
        self._acting: dict[str, tuple[Any, np.ndarray | None]] = {}
        self._pending: set[str] = set()  # seats whose last action's step is not complete
        self._reward: dict[str, float] = {}  # what each seat received since its last action
        self._ended: set[str] = set()
        self._results: dict[str, SeatResult] = {}

    @property
    def env_index(self) -> int:
        """The env's global index in the job."""
        return self.seeds.env_index

    @property
    def episode(self) -> int:
        """The number of the match under way (0 for the first)."""
        return self._match.episode

    @property
    def acting(self) -> tuple[str, ...]:
        """The seats that act now (what :meth:`step` needs actions for)."""
        return tuple(self._acting)

    @property
    def returns(self) -> dict[str, float]:
        """Each seat's return so far in the match under way (seats that joined it)."""
        return dict(self._match.returns)

    def reset(self) -> SeatStep:
        """Start the next match of the seed sequence."""
        self._start()
        return self._report({}, None)

    def step(self, actions: Mapping[str, Any]) -> SeatStep:
        """Apply the actions of the seats that act now (others' are ignored); a move that the
        seat's mask says is illegal is refused, naming the seat, before the env sees it."""
        if not self._acting:
            raise RuntimeError("step() before reset(): no seat acts yet")
        chosen = {seat: self._legal(seat, actions) for seat in self._acting}
        self._pending.update(chosen)
        self._acting = {}
        self._results = {}
        self._match.length += 1
        self._advance(chosen)
        ended = None
        results = self._results  # the same dict _finish adds the dropped seats' results to
        if not self._acting:  # no seat can act: the match is over
            ended = self._finish()
            self._start()
        return self._report(results, ended)

    def state(self) -> dict[str, Any]:
        """Plain data for a checkpoint: the seed sequence's position. The match under way is
        not kept (PettingZoo envs have no general state capture): a restored env starts the
        next match, so no match number is played or recorded twice."""
        return {"seeds": self.seeds.state()}

    def load_state(self, state: dict[str, Any]) -> SeatStep:
        """Continue from :meth:`state`'s data: the match under way is abandoned and the next
        one of the sequence starts (what this returns)."""
        self.seeds.load_state(state["seeds"])
        return self.reset()

    def close(self) -> None:
        """Close the env."""
        self.env.close()

    # --- what subclasses implement ------------------------------------------------------
    @abstractmethod
    def _begin(self, seed: int) -> None:
        """Reset the env with ``seed`` and report the seats that act first."""

    @abstractmethod
    def _advance(self, actions: dict[str, Any]) -> None:
        """Step the env with the acting seats' ``actions`` and report what follows, up to the
        next seats that act (none when the match is over)."""

    # --- what subclasses report through -------------------------------------------------
    def _receive(self, rewards: Mapping[str, float]) -> None:
        """Rewards of one env step, each to its seat's return and to what the seat received
        since its last action."""
        for seat, reward in rewards.items():
            self._match.join(seat)
            value = float(reward)
            self._match.returns[seat] += value
            self._reward[seat] = self._reward.get(seat, 0.0) + value

    def _seat_ready(self, seat: str, obs: Any, info: Mapping[str, Any] | None) -> None:
        """``seat`` acts next, seeing ``obs``: the step of its last action is complete."""
        if seat in self._ended:
            return
        self._match.join(seat)
        reward = self._reward.pop(seat, 0.0)  # before its first action: its return's only
        if seat in self._pending:
            self._pending.discard(seat)
            self._results[seat] = SeatResult(reward)
        self._acting[seat] = split_observation(self.spaces[seat], obs, info)

    def _seat_ends(self, seat: str, obs: Any, info: Mapping[str, Any] | None,
                   terminated: bool, truncated: bool) -> None:
        """The match ended for ``seat`` (once: later calls are ignored); ``obs`` is its final
        observation, or None where the env has none to give. Termination wins over truncation
        where an env flags both (shimmy's OpenSpiel games do at every game's end): there is no
        value to bootstrap after a terminal state."""
        if seat in self._ended:
            return
        truncated = truncated and not terminated
        self._match.join(seat)
        self._ended.add(seat)
        reward = self._reward.pop(seat, 0.0)
        self._match.final_rewards[seat] = reward
        self._match.terminated[seat] = terminated
        self._match.truncated[seat] = truncated
        if seat in self._pending:
            self._pending.discard(seat)
            final = None if obs is None else split_observation(self.spaces[seat], obs, info)[0]
            self._results[seat] = SeatResult(reward, terminated, truncated, final)

    # --- the bookkeeping ------------------------------------------------------------------
    def _legal(self, seat: str, actions: Mapping[str, Any]) -> Any:
        if seat not in actions:
            raise ValueError(f"seat '{seat}' acts now but was given no action")
        action = actions[seat]
        mask = self._acting[seat][1]
        if mask is not None and not mask[int(action)]:
            raise ValueError(f"seat '{seat}' was given the illegal move {action} (legal: "
                             f"{np.flatnonzero(mask).tolist()}): the policy must honour the "
                             f"action mask")
        return action

    def _start(self) -> None:
        episode, seed = self.seeds.next()
        self._match = _Match(episode, seed)
        self._acting, self._results = {}, {}
        self._pending, self._reward, self._ended = set(), {}, set()
        self._begin(seed)

    def _finish(self) -> EpisodeEnd:
        """The match's end; a seat the env dropped without ending it counts as truncated."""
        match = self._match
        for seat in list(match.seats):
            self._seat_ends(seat, None, None, False, True)
        return EpisodeEnd(self.env_index, match.episode, match.seed, tuple(match.seats),
                          dict(match.returns), dict(match.final_rewards),
                          dict(match.terminated), dict(match.truncated), match.length)

    def _report(self, results: dict[str, SeatResult], ended: EpisodeEnd | None) -> SeatStep:
        acting = tuple(seat for seat in self.seats if seat in self._acting)
        return SeatStep(acting, {seat: self._acting[seat][0] for seat in acting},
                        {seat: self._acting[seat][1] for seat in acting}, results, ended)
