"""A collector's envs, some of whose slots may play recorded episodes instead of stepping an env.

The env layer makes every collector's envs (:func:`collector_env_groups`): ``env.num_envs``
envs from the collector's global env offset, in its groups. An algorithm may declare that
some slots of the job play recordings (PPO+D replays demonstrations there): it hands a
:class:`SlotPlay`, which says which of a collector's slots play and wraps the vector env
made for the others in a :class:`ScriptedSlots`. What a collector needs of such slots
(the actions they took, their checkpoint state) it reads through :class:`ScriptedSlots`,
never through the algorithm that declared them.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Protocol

import gymnasium as gym
import numpy as np

from hpcrl.envs.groups import EnvGroups
from hpcrl.envs.vector import make_vector_env
from hpcrl.sections.schema import EnvConfig


class ScriptedSlots(gym.vector.VectorEnv, ABC):
    """A vector env whose slots ``replay_index`` play recordings: their actions are the
    recording's (:meth:`replayed_actions`, which the collector writes into its buffer in
    place of what it sampled), their episodes are no game's (length 0 in the rollout), and
    they have a state of their own to checkpoint (:meth:`replay_state`)."""

    replay_index: np.ndarray

    @abstractmethod
    def replayed_actions(self) -> tuple[np.ndarray, np.ndarray]:
        """The slots that played a recorded action in the last step, and those actions."""

    @abstractmethod
    def replay_state(self) -> dict[str, Any]:
        """The slots' state (what they play, where they are), as plain data."""

    @abstractmethod
    def load_replay_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`replay_state` gave."""


class SlotPlay(Protocol):
    """What an algorithm declares to have some slots of the job play recordings."""

    def slots(self, env_offset: int, num_envs: int) -> np.ndarray:
        """Which of a collector's envs ``[env_offset, env_offset + num_envs)`` play (a bool
        mask): fixed by global env index, the same for any layout."""
        ...

    def wrap(self, real: gym.vector.VectorEnv, slots: np.ndarray) -> ScriptedSlots:
        """The collector's envs: ``real`` (made for the slots that do not play) and the
        playing ``slots``."""
        ...

    def problem(self, observation_space: gym.Space, action_space: gym.Space) -> str | None:
        """Why the recordings do not fit the env (a line naming the key and the fix), or
        None."""
        ...


def collector_env_groups(env: EnvConfig, env_offset: int, groups: int = 1,
                         play: SlotPlay | None = None) -> EnvGroups:
    """A collector's ``env.num_envs`` envs of the section ``env`` from global index
    ``env_offset``, in ``groups`` groups (``scheme.env_groups``, resolved): each a vector
    env of :func:`~hpcrl.envs.vector.make_vector_env`; with ``play``, one group whose
    playing slots replay recordings and whose other slots step real envs (the config checks
    that such a job has one group)."""
    n = env.num_envs
    if play is None:
        return EnvGroups.of(lambda first, count: make_vector_env(
            env, count, range(env_offset + first, env_offset + first + count)), n, groups)
    slots = play.slots(env_offset, n)
    real = [env_offset + int(i) for i in np.flatnonzero(~slots)]
    return EnvGroups([play.wrap(make_vector_env(env, len(real), real), slots)])
