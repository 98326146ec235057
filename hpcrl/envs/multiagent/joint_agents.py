"""A simultaneous-move game whose agents all act with one shared policy (``env.agents=shared``).

:class:`JointAgentsEnv` holds one PettingZoo Parallel env and steps all its agents at once:
its observation is one row per agent (``[agents, ...]``), its action one row per agent, and
its reward the mean of the agents' rewards, each agent's own in
``info["agent_rewards"]``. Two consumers read it:

- training, through :class:`~hpcrl.envs.multiagent.agent_slots.AgentSlotsVectorEnv`, which
  turns every agent of every game into one env slot: each agent keeps its own trajectory,
  return and bootstrap, and the shared policy learns from all of them (parameter sharing);
- evaluation (:mod:`hpcrl.learning.evaluation`), which acts for the rows in one batch and
  counts the mean agent's return.

Agents may join late or leave early (killed, finished): an agent outside the game has a row
of zeros (all moves legal), reward 0 and its moves ignored, until the game ends when no
agent is left in it: SuperSuit's ``black_death`` convention, which keeps every slot
stepping. Its slot's episode ends with the game, so its return is the agent's own.
Matches are seeded as the league's are (:mod:`~hpcrl.envs.multiagent.seeding`): a reset
with a seed starts its sequence, a reset without one takes the sequence's next seed. The
state
(:meth:`JointAgentsEnv.get_state`) is the match's seed, its number and the moves played
since, which a resume replays exactly.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from hpcrl.envs.multiagent.aec import is_aec
from hpcrl.envs.multiagent.named_envs import MultiAgentEnvError, make_pettingzoo
from hpcrl.envs.multiagent.seats import SeatSpace, seat_space, split_observation
from hpcrl.envs.multiagent.seeding import episode_seed

AGENT_REWARDS = "agent_rewards"  # the info key of each agent's own reward


def agent_observation_space(space: SeatSpace) -> gym.spaces.Box:
    """One agent's row: its observation flattened, then its legal-move mask where its action
    is Discrete (``actor.action_mask`` reads it there; all ones where the game gives none)."""
    observed = space.observation_space
    if not isinstance(observed, gym.spaces.Box):
        raise MultiAgentEnvError(f"env.agents=shared takes games of Box observations; this one "
                                 f"observes {observed}: flatten it with a PettingZoo wrapper")
    low = [np.asarray(np.broadcast_to(observed.low, observed.shape), np.float32).ravel()]
    high = [np.asarray(np.broadcast_to(observed.high, observed.shape), np.float32).ravel()]
    if space.mask_size is not None:
        low.append(np.zeros(space.mask_size, np.float32))
        high.append(np.ones(space.mask_size, np.float32))
    return gym.spaces.Box(np.concatenate(low), np.concatenate(high), dtype=np.float32)


def joint_action_space(single: gym.Space, agents: int) -> gym.Space:
    """The action of all ``agents`` at once: one row of ``single`` per agent."""
    if isinstance(single, gym.spaces.Discrete):
        return gym.spaces.MultiDiscrete(np.full(agents, single.n, dtype=np.int64))
    if isinstance(single, gym.spaces.Box):
        return gym.spaces.Box(np.broadcast_to(single.low, (agents, *single.shape)),
                              np.broadcast_to(single.high, (agents, *single.shape)),
                              dtype=single.dtype)
    raise MultiAgentEnvError(f"env.agents=shared takes Discrete or Box actions; this game's "
                             f"agents take {single}")


class JointAgentsEnv(gym.Env):
    """See the module. ``game``: a multi-agent env name
    (:mod:`~hpcrl.envs.multiagent.named_envs`) of a Parallel env, made with ``game_kwargs``."""

    metadata: dict[str, Any] = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, game: str, game_kwargs: dict[str, Any] | None = None) -> None:
        self.game, self.game_kwargs = game, dict(game_kwargs or {})
        self.render_mode = self.game_kwargs.get("render_mode")
        self.env = make_pettingzoo(game, **self.game_kwargs)
        if is_aec(self.env):
            self.env.close()
            raise MultiAgentEnvError(
                f"env.agents=shared steps every agent of a game at once, but '{game}' is "
                f"turn-based (PettingZoo's AEC API); train it by self-play: env.agents=league "
                f"(or auto)")
        self.agents = tuple(self.env.possible_agents)
        spaces = {a: seat_space(self.env.observation_space(a), self.env.action_space(a))
                  for a in self.agents}
        first = spaces[self.agents[0]]
        for agent, space in spaces.items():
            if space != first:
                raise MultiAgentEnvError(
                    f"env.agents=shared plays every agent of '{game}' with one policy, but "
                    f"agent '{agent}' has spaces {space.observation_space}, "
                    f"{space.action_space} where '{self.agents[0]}' has "
                    f"{first.observation_space}, {first.action_space}; pad them to one shape "
                    f"(SuperSuit's pad_observations_v0 and pad_action_space_v0)")
        self.seat = first
        #: one agent's observation and action: what the shared policy sees and does
        self.agent_observation_space = agent_observation_space(first)
        self.agent_action_space = first.action_space
        count = len(self.agents)
        row = self.agent_observation_space
        self.observation_space = gym.spaces.Box(
            np.broadcast_to(row.low, (count, *row.shape)),
            np.broadcast_to(row.high, (count, *row.shape)), dtype=np.float32)
        self.action_space = joint_action_space(first.action_space, count)
        self._base = 0  # the seed of the sequence's first match
        self._episode = -1  # the number of the match under way
        self._moves: list[np.ndarray] = []  # the joint actions of the match under way

    @property
    def agent_rows(self) -> int:
        """The number of agents, the rows of every observation and action."""
        return len(self.agents)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start a match: the first of a new sequence with ``seed``, else the next one."""
        super().reset(seed=seed)
        if seed is not None:
            self._base, self._episode = int(seed), -1
        self._episode += 1
        return self._begin(), {AGENT_REWARDS: np.zeros(self.agent_rows, np.float32)}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Every agent's action at once; the mean reward, and each agent's in the info."""
        moves = np.asarray(action)
        self._moves.append(moves.copy())
        return self._play(moves)

    def render(self) -> Any:
        """The game's own frame (made with ``render_mode="rgb_array"``)."""
        return self.env.render()

    def close(self) -> None:
        """Close the game."""
        self.env.close()

    def get_state(self) -> dict[str, Any]:
        """The match under way, as its sequence's seed, its number and its moves."""
        return {"base": self._base, "episode": self._episode,
                "moves": [m.tolist() for m in self._moves]}

    def set_state(self, state: dict[str, Any]) -> None:
        """Replay the match of :meth:`get_state` to where it was."""
        self._base, self._episode = int(state["base"]), int(state["episode"])
        self._begin()
        for moves in state["moves"]:
            self._moves.append(np.asarray(moves))
            self._play(np.asarray(moves))

    def _begin(self) -> np.ndarray:
        """Reset the game with the match's seed; the agents' first rows."""
        self._moves = []
        self._ends: dict[str, str] = {}  # how each agent that left the game left it
        obs, infos = self.env.reset(seed=episode_seed(self._base, 0, self._episode))
        return self._rows(obs, infos)

    def _rows(self, obs: dict[str, Any], infos: dict[str, Any]) -> np.ndarray:
        """Every agent's row of ``obs`` (and its legal moves), stacked in agent order; an
        agent not in the game (not yet, or no more) has a row of zeros, all moves legal."""
        width = int(self.agent_observation_space.shape[0])
        rows = np.zeros((self.agent_rows, width), np.float32)
        for k, agent in enumerate(self.agents):
            if agent not in obs:
                if self.seat.mask_size is not None:
                    rows[k, width - self.seat.mask_size:] = 1.0
                continue
            seen, mask = split_observation(self.seat, obs[agent], infos.get(agent))
            parts = [np.asarray(seen, np.float32).ravel()]
            if mask is not None:
                parts.append(mask.astype(np.float32))
            rows[k] = np.concatenate(parts)
        return rows

    def _play(self, moves: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """One step of the game with the moves of the agents in it (the others' are
        ignored); it ends when no agent is left in it."""
        live = set(self.env.agents)
        actions = {agent: self._env_action(moves[k]) for k, agent in enumerate(self.agents)
                   if agent in live}
        obs, rewards, terminations, truncations, infos = self.env.step(actions)
        agent_rewards = np.array([float(rewards.get(a, 0.0)) for a in self.agents], np.float32)
        for agent in live:
            if terminations.get(agent, False):
                self._ends[agent] = "terminated"
            elif truncations.get(agent, False):
                self._ends[agent] = "truncated"
        over = not self.env.agents
        # an agent that left has zeros from now on; at the game's end every agent's last
        # observation stays (the final observations a truncated episode bootstraps from)
        seen = obs if over else {a: o for a, o in obs.items() if a not in self._ends}
        terminated = over and all(self._ends.get(a) == "terminated" for a in live)
        return (self._rows(seen, infos), float(agent_rewards.mean()), terminated,
                over and not terminated, {AGENT_REWARDS: agent_rewards})

    def _env_action(self, move: np.ndarray) -> Any:
        """An agent's row of the joint action as its env takes it."""
        if isinstance(self.agent_action_space, gym.spaces.Discrete):
            return int(move)
        return np.asarray(move, dtype=self.agent_action_space.dtype)
