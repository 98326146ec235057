"""Every agent of every game an env slot: a collector's vector env under ``env.agents=shared``.

:class:`AgentSlotsVectorEnv` wraps a vector env of G
:class:`~hpcrl.envs.multiagent.joint_agents.JointAgentsEnv` games of A agents each (made by
any backend that steps Gymnasium envs: in the collector's process or in subprocesses, with
restarts) and shows it as a vector env of G x A slots, agent ``a`` of game ``g`` in slot
``g * A + a``. Each slot gets its agent's observation, reward and final observation, so
the collectors, buffers and learners see A single-agent envs per game and the shared policy
learns from every agent's steps; ``env.num_envs`` counts slots (agents), and a collector's
(or env group's) slots hold whole games.

Game ``g`` of a collector is seeded with the seed of its first slot, so a game is the same
wherever its slots run. States, and any other ``call``/``set_attr``, go to the games: a
slot reads its game's value, and a game takes the value of its first slot.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from hpcrl.envs.multiagent.joint_agents import AGENT_REWARDS
from hpcrl.envs.restarts import RESTARTED
from hpcrl.errors import ConfigError


def slot_games(global_indices: Sequence[int], agents: int) -> list[int]:
    """The job's index of each game of a collector's slots ``global_indices`` (which must
    hold whole games, in order: a ConfigError naming the fix otherwise)."""
    indices = list(global_indices)
    whole = len(indices) % agents == 0 and all(
        indices[k] == indices[k - k % agents] + k % agents and indices[k - k % agents] % agents == 0
        for k in range(len(indices)))
    if not whole:
        raise ConfigError(f"env.agents=shared: every game's {agents} agents take {agents} env "
                          f"slots of one collector, but this collector (or env group) holds "
                          f"slots {indices[0]}..{indices[-1]} ({len(indices)}); make env.num_envs "
                          f"a multiple of {agents} on every collector and env group")
    return [indices[k] // agents for k in range(0, len(indices), agents)]


class AgentSlotsVectorEnv(gym.vector.VectorEnv):
    """See the module. ``games``: the vector env of G joint games (same-step autoreset);
    ``agents``: A, the rows of each."""

    def __init__(self, games: gym.vector.VectorEnv, agents: int,
                 observation_space: gym.Space, action_space: gym.Space) -> None:
        self.games, self.agents = games, agents
        self.num_envs = games.num_envs * agents
        self.single_observation_space = observation_space
        self.single_action_space = action_space
        self.observation_space = gym.vector.utils.batch_space(observation_space, self.num_envs)
        self.action_space = gym.vector.utils.batch_space(action_space, self.num_envs)
        self.metadata = dict(games.metadata)

    def reset(self, *, seed: Any = None, options: dict[str, Any] | None = None
              ) -> tuple[np.ndarray, dict[str, Any]]:
        """Reset every game (``seed``: one per slot; a game takes its first slot's)."""
        game_seeds = seed[::self.agents] if isinstance(seed, (list, tuple)) else seed
        obs, info = self.games.reset(seed=game_seeds, options=options)  # type: ignore[arg-type]
        return self._slots(obs), self._slot_info(info)

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                          dict[str, Any]]:
        """Step every game with its agents' rows of ``actions``."""
        joint = np.asarray(actions).reshape(self.games.num_envs, self.agents,
                                             *np.shape(actions)[1:])
        obs, _, terminated, truncated, info = self.games.step(joint)
        ended = terminated | truncated
        rewards = np.zeros((self.games.num_envs, self.agents), np.float32)
        going = info.get(AGENT_REWARDS)
        if going is not None:
            rewards[~ended] = np.asarray(going)[~ended]
        out = self._slot_info(info)
        if ended.any():
            final_obs = np.empty(self.num_envs, dtype=object)
            final_info = info["final_info"]
            given = final_info.get("_" + AGENT_REWARDS, np.zeros(len(ended), bool))
            for g in np.flatnonzero(ended):
                # (a game cut by a failure, hpcrl.envs.restarts, ends with no reward)
                rewards[g] = final_info[AGENT_REWARDS][g] if given[g] else 0.0
                for a in range(self.agents):
                    final_obs[g * self.agents + a] = info["final_obs"][g][a]
            out.update({"final_obs": final_obs, "_final_obs": np.repeat(ended, self.agents),
                        "final_info": self._slot_info(final_info),
                        "_final_info": np.repeat(ended, self.agents)})
        return (self._slots(obs), rewards.reshape(-1), np.repeat(terminated, self.agents),
                np.repeat(truncated, self.agents), out)

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Each slot's value of its game's ``name`` (called where it is a method)."""
        values = self.games.call(name, *args, **kwargs)  # type: ignore[attr-defined]
        return tuple(value for value in values for _ in range(self.agents))

    def set_attr(self, name: str, values: Any) -> None:
        """Set ``name`` on every game, each from its first slot's value."""
        if isinstance(values, (list, tuple)):
            values = list(values)[::self.agents]
        self.games.set_attr(name, values)  # type: ignore[attr-defined]

    def close_extras(self, **kwargs: Any) -> None:
        """Close the games."""
        self.games.close()

    def _slot_info(self, info: dict[str, Any]) -> dict[str, Any]:
        """A games' info (arrays over games) as the slots' (arrays over slots): each slot
        holds its game's entry (an env made again, :data:`~hpcrl.envs.restarts.RESTARTED`,
        marks the game's first slot alone, so that restarts are counted once a game). The
        agents' rewards and final observations are the caller's."""
        out: dict[str, Any] = {}
        for key, value in info.items():
            if key in (AGENT_REWARDS, "_" + AGENT_REWARDS, "final_obs", "_final_obs",
                       "final_info", "_final_info"):
                continue
            if isinstance(value, dict):
                out[key] = self._slot_info(value)
            elif isinstance(value, np.ndarray) and value.shape[:1] == (self.games.num_envs,):
                out[key] = np.repeat(value, self.agents, axis=0)
                if key == "_" + RESTARTED:
                    out[key] = out[key] & (np.arange(self.num_envs) % self.agents == 0)
            else:
                out[key] = value
        return out

    def _slots(self, obs: np.ndarray) -> np.ndarray:
        """``[G, A, ...]`` rows as ``[G * A, ...]`` slots."""
        return np.asarray(obs).reshape(self.num_envs, *np.shape(obs)[2:])
