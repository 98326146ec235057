"""The env-state core every collector stands on: where each env is, and how it got there.

Both collectors (rollouts for the on-policy learners, transition chunks for the replay ones)
step envs that are global indices ``env_offset ..`` of the job's ``total_envs``, in groups
that take turns (:class:`~hpcrl.envs.groups.EnvGroups`: one group unless
``scheme.env_groups`` asks for more).
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

from hpcrl.envs.groups import EnvGroup, EnvGroups
from hpcrl.envs.make import game_episodes
from hpcrl.envs.obs_format import ObsFormat
from hpcrl.envs.restarts import (
    REPLACED,
    EnvFailure,
    RestartLedger,
    describe_error,
    fresh_seed,
    restart_marks,
)
from hpcrl.envs.state import from_plain, to_plain
from hpcrl.envs.vector import env_seeds, restore_vector_env_state, vector_env_state
from hpcrl.sections.schema import EnvConfig


@dataclass
class StepFacts:
    """What vector step ``t`` of a collection gave one ``group`` of envs (every array below
    is the group's, indexed by its own envs; :attr:`cols` are its columns):
    the observations the actions were chosen on (as the envs returned them), the next ones
    (a new episode's first where one ended), rewards and episode ends per env, the indices
    of the envs whose episode ``ended``, and of those the ones whose final observations the
    filler asked for (``final_envs``) with those observations carried (``final_obs``,
    ``None`` when there are none)."""

    t: int
    group: EnvGroup
    obs: np.ndarray
    next_obs: np.ndarray
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    done: np.ndarray
    ended: np.ndarray
    final_envs: np.ndarray
    final_obs: np.ndarray | None
    # the envs whose episode a failure cut at this step (None: none): their step is no
    # transition, their final observation the last one they gave
    # (:mod:`hpcrl.envs.restarts`)
    cut: np.ndarray | None = None

    @property
    def cols(self) -> slice:
        """The group's columns among the collector's envs."""
        return self.group.cols


@dataclass
class CollectionFacts:
    """The header of a collected buffer: the acting weights' version, the first env's
    global index, the collector's id and the seconds the collection took."""

    weights_version: int
    env_offset: int
    source: int
    seconds: float
    env_restarts: int = 0  # envs made again during the collection


def restart_ledger(config: EnvConfig, num_envs: int, env_offset: int) -> RestartLedger:
    """The count and bound of a collector's envs made again (``env.max_restarts`` within
    ``env.restart_window`` steps of each)."""
    return RestartLedger(num_envs, env_offset, config.max_restarts, config.restart_window)


class EnvCore:
    """``envs`` (a vector env, or groups of them) at global indices ``env_offset ..`` of a
    job of ``total_envs`` envs (default: its own), reset with the job's seeds; ``stream``
    sets the generators apart from other collectors' (a collector kind's own constant).

    ``restarts`` counts and bounds the envs made again after a failure (default: the
    bound of ``env.max_restarts``'s default). ``incarnation`` > 0: this core takes the
    place of a collector that was lost (the ``incarnation``-th to hold its envs), whose
    envs and generators start from fresh seeds instead of the job's first ones."""

    def __init__(self, envs: gym.vector.VectorEnv | EnvGroups, obs_format: ObsFormat,
                 seed: int, env_offset: int = 0, total_envs: int | None = None,
                 stream: tuple[int, ...] = (), restarts: RestartLedger | None = None,
                 incarnation: int = 0) -> None:
        if not isinstance(envs, EnvGroups):
            envs = EnvGroups([envs])
        n = envs.num_envs
        self.envs, self.obs_format = envs, obs_format
        self.num_envs, self.env_offset = n, env_offset
        self.total_envs = total_envs or n
        again = (incarnation,) if incarnation else ()
        self.rngs = [np.random.default_rng([seed, *stream, env_offset + i, *again])
                     for i in range(n)]
        self.vector_steps = 0  # steps of this vector env so far
        self.episode_return = np.zeros(n, np.float64)
        self.episode_length = np.zeros(n, np.int64)
        self.restarts = (restarts if restarts is not None
                         else restart_ledger(EnvConfig(), n, env_offset))
        seeds = env_seeds(seed, env_offset, n)
        if incarnation:
            seeds = [fresh_seed(s, REPLACED, incarnation) for s in seeds]
        self.obs = np.concatenate([obs_format.carry(part) for part in envs.reset(seed=seeds)])
        for group, info in zip(self.groups, envs.reset_infos, strict=True):
            self.note_restarts(group, info, 0)
        self._next: np.ndarray | None = None  # the step's next observations, group by group
        self._raw: dict[str, np.ndarray] = {}

    @property
    def next_obs(self) -> np.ndarray:
        """Where each group's next observations go as its step ends (a buffer the size of
        :attr:`obs`): :attr:`obs` stays the step's own until every group has stepped."""
        if self._next is None or self._next.shape != self.obs.shape \
                or self._next.dtype != self.obs.dtype:
            self._next = np.empty_like(self.obs)
        return self._next

    def advance(self) -> None:
        """Every group has taken the step: its next observations become the current ones
        (the two buffers swap, so what a filler was shown stays valid one step more)."""
        self.obs, self._next = self.next_obs, self.obs

    @property
    def groups(self) -> tuple[EnvGroup, ...]:
        """The groups of envs that take turns, in column order."""
        return self.envs.groups

    def begin(self, group: EnvGroup, actions: np.ndarray) -> None:
        """Start ``group``'s step with ``actions`` (its envs' rows, as the env takes them);
        an env's error that no restart took up is an :class:`EnvFailure` naming the group's
        envs."""
        try:
            self.envs.begin(group.index, actions)
        except EnvFailure:
            raise
        except Exception as err:
            raise self._failure(group, err) from err

    def _failure(self, group: EnvGroup, err: Exception) -> EnvFailure:
        """The failure for good of one of ``group``'s envs (restarts off, or an error of the
        vector env itself that no restart takes up)."""
        first = self.env_offset + group.cols.start
        last = self.env_offset + group.cols.stop - 1
        which = f"env {first}" if first == last else f"one of the envs {first}-{last}"
        restarts = self.restarts.max_restarts
        why = ("env.max_restarts=0: restarts are off" if restarts <= 0 else
               "its vector env failed as a whole, which no restart of one env takes up")
        return EnvFailure(f"{which} (global index) failed: {describe_error(err)} ({why})")

    def end(self, group: EnvGroup) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                            dict[str, Any]]:
        """What ``group``'s step returned, indexed by its own envs: the next observations
        carried, rewards, episode ends and info; its episodes' running return and length
        advanced. ``obs`` is left to the caller, which may still need the observations the
        actions were chosen on."""
        try:
            obs, rewards, terminated, truncated, info = self.envs.end(group.index)
        except EnvFailure:
            raise
        except Exception as err:
            raise self._failure(group, err) from err
        self.episode_return[group.cols] += rewards
        self.episode_length[group.cols] += 1
        return self.obs_format.carry(obs), rewards, terminated, truncated, info

    def note_restarts(self, group: EnvGroup, info: dict[str, Any], t: int
                      ) -> np.ndarray | None:
        """The envs of ``group`` whose episode a failure cut in its step ``t`` of this
        collection (a mask of the group's envs, None when none), every env made again
        counted (:class:`~hpcrl.envs.restarts.RestartLedger`: past its bound it
        raises, naming the env)."""
        cut, made = restart_marks(info, group.size)
        for env, why in made:
            self.restarts.note(group.cols.start + env, self.vector_steps + t, why)
        return cut

    def end_episodes(self, group: EnvGroup, done: np.ndarray, info: dict[str, Any],
                     cut: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The game's return and length of every env of ``group`` (0 where none ended: see
        :func:`~hpcrl.envs.make.game_episodes`) for the episodes ``done`` ended; their
        trackers start again. An episode ``cut`` by a failure is no episode of the game
        (length 0, as a lost life)."""
        cols = group.cols
        returns, lengths = game_episodes(info, done, self.episode_return[cols],
                                         self.episode_length[cols])
        if cut is not None:
            returns, lengths = np.where(cut, 0.0, returns), np.where(cut, 0, lengths)
        self.episode_return[cols][done] = 0.0
        self.episode_length[cols][done] = 0
        return returns, lengths

    def final_observations(self, envs: np.ndarray, info: dict[str, Any]) -> np.ndarray:
        """The carried final observations of the episodes of ``envs`` (a group's own
        indices, ``info`` its step's) that just ended (the vector env has already reset
        them)."""
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
