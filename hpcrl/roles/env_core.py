"""The env-state core every collector stands on: where each env is, and how it got there.

Both collectors (rollouts for the on-policy learners, transition chunks for the replay ones)
step a vector of envs that are global indices ``env_offset ..`` of the job's ``total_envs``.
What they share lives here, once: the seeded first reset, each env's own random generator
(seeded by the job's seed, a stream of the collector's kind and the env's global index, so
draws do not depend on how envs are spread over processes), the current observations in
the env's carried dtype, the running episode return and length, the count of vector steps,
reused buffers for what the envs returned during a collection, and the part of a
checkpoint that holds all of it. What differs (how actions are chosen, what is written
where) stays in each collector.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from hpcrl.core.env_state import from_plain, to_plain
from hpcrl.core.envs import env_seeds, reset_seeded, restore_vector_env_state, vector_env_state
from hpcrl.core.obs_format import ObsFormat
from hpcrl.core.suites import game_episodes


@dataclass
class StepFacts:
    """What vector step ``t`` of a collection gave: the observations the actions were chosen
    on (as the envs returned them), the next ones (a new episode's first where one ended),
    rewards and episode ends per env, the indices of the envs whose episode ``ended``, and
    of those the ones whose final observations the filler asked for (``final_envs``) with
    those observations carried (``final_obs``, ``None`` when there are none)."""

    t: int
    obs: np.ndarray
    next_obs: np.ndarray
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    done: np.ndarray
    ended: np.ndarray
    final_envs: np.ndarray
    final_obs: np.ndarray | None


@dataclass
class CollectionFacts:
    """The header of a collected buffer: the acting weights' version, the first env's
    global index, the collector's id and the seconds the collection took."""

    weights_version: int
    env_offset: int
    source: int
    seconds: float


class EnvCore:
    """``envs`` at global indices ``env_offset ..`` of a job of ``total_envs`` envs
    (default: its own), reset with the job's seeds; ``stream`` sets the generators apart
    from other collectors' (a collector kind's own constant)."""

    def __init__(self, envs: gym.vector.VectorEnv, obs_format: ObsFormat, seed: int,
                 env_offset: int = 0, total_envs: int | None = None,
                 stream: tuple[int, ...] = ()) -> None:
        n = envs.num_envs
        self.envs, self.obs_format = envs, obs_format
        self.num_envs, self.env_offset = n, env_offset
        self.total_envs = total_envs or n
        self.rngs = [np.random.default_rng([seed, *stream, env_offset + i]) for i in range(n)]
        self.vector_steps = 0  # steps of this vector env so far
        self.episode_return = np.zeros(n, np.float64)
        self.episode_length = np.zeros(n, np.int64)
        self.obs = obs_format.carry(reset_seeded(envs, env_seeds(seed, env_offset, n))[0])
        self._raw: dict[str, np.ndarray] = {}

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                 np.ndarray, dict[str, Any]]:
        """Step every env with ``actions`` (as the env takes them); the next observations
        carried, and the episodes' running return and length advanced. ``obs`` is left to
        the caller, which may still need the observations the actions were chosen on."""
        obs, rewards, terminated, truncated, info = self.envs.step(actions)
        self.episode_return += rewards
        self.episode_length += 1
        return self.obs_format.carry(obs), rewards, terminated, truncated, info

    def end_episodes(self, done: np.ndarray, info: dict[str, Any]
                     ) -> tuple[np.ndarray, np.ndarray]:
        """The game's return and length of every env (0 where none ended: see
        :func:`~hpcrl.core.suites.game_episodes`) for the episodes ``done`` ended; their
        trackers start again."""
        returns, lengths = game_episodes(info, done, self.episode_return, self.episode_length)
        self.episode_return[done] = 0.0
        self.episode_length[done] = 0
        return returns, lengths

    def final_observations(self, envs: np.ndarray, info: dict[str, Any]) -> np.ndarray:
        """The carried final observations of the episodes of ``envs`` that just ended (the
        vector env has already reset them)."""
        return self.obs_format.carry_each([info["final_obs"][i] for i in envs])

    def raw_buffer(self, name: str, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        """A reused buffer of ``shape`` for what the envs return during one collection
        (kept across collections, grown when a longer one needs it)."""
        buf = self._raw.get(name)
        if buf is None or buf.shape[0] < shape[0] or buf.shape[1:] != shape[1:] \
                or buf.dtype != np.dtype(dtype):
            buf = self._raw[name] = np.empty(shape, dtype)
        return buf[:shape[0]]

    # -- checkpoints -------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The envs' states (and the attributes that could not be captured), generators,
        observations, episode trackers and step count, as plain data."""
        env_states, missing = vector_env_state(self.envs)
        return {"env_offset": self.env_offset, "envs": env_states, "envs_inexact": missing,
                "rngs": [to_plain(r) for r in self.rngs],
                "obs": torch.from_numpy(self.obs.copy()),
                "episode_return": torch.from_numpy(self.episode_return.copy()),
                "episode_length": torch.from_numpy(self.episode_length.copy()),
                "vector_steps": self.vector_steps}

    def load_generators(self, state: dict[str, Any]) -> list[str]:
        """Restore the generators and step count of :meth:`state_dict`, refusing a state of
        another env layout; returns the env attributes that could not be saved (then the
        envs keep their fresh seeded reset: :meth:`load_envs` is not to be called)."""
        if state["env_offset"] != self.env_offset or len(state["rngs"]) != self.num_envs:
            raise ValueError(f"checkpoint holds envs from global index {state['env_offset']} "
                             f"({len(state['rngs'])} envs) but this collector runs envs from "
                             f"{self.env_offset} ({self.num_envs}): the env layout changed")
        self.rngs = [from_plain(r, cur) for r, cur in zip(state["rngs"], self.rngs, strict=True)]
        self.vector_steps = int(state.get("vector_steps", 0))
        return list(state["envs_inexact"])

    def load_envs(self, state: dict[str, Any]) -> None:
        """Restore the envs, observations and episode trackers of :meth:`state_dict`."""
        self.episode_return = state["episode_return"].numpy().copy()
        self.episode_length = state["episode_length"].numpy().copy()
        restore_vector_env_state(self.envs, state["envs"])
        self.obs = state["obs"].numpy().copy()
