"""``env.normalize_obs`` and ``env.normalize_reward`` as one transform between the envs and
a rollout, not steps inlined in the collector's loop.

What the envs return goes through the transform on its way into the rollout: observations
are centred and scaled by the actor's running statistics (``actor.obs_rms``), rewards scaled
by the running standard deviation of the discounted return (``actor.ret_rms``), each clipped.
The transform keeps what it needs between steps (each env's discounted return) and reports,
per rollout, the moments of what it saw, which the learner merges into the statistics that
then come back with the next weights. Turned off, each step is the identity.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from hpcrl.models.actor import ActorCritic
from hpcrl.numerics.normalization import Moments, Normalizer
from hpcrl.sections.schema import EnvConfig


class NormalizingTransform:
    """The normalisation of ``config`` (an ``env`` section) for ``num_envs`` envs whose
    returns are discounted by ``gamma``."""

    def __init__(self, config: EnvConfig, gamma: float, num_envs: int) -> None:
        self.normalizes_obs, self.normalizes_reward = config.normalize_obs, config.normalize_reward
        self.gamma = gamma
        self.obs_norm = Normalizer(config.clip_obs)
        self.rew_norm = Normalizer(config.clip_reward)
        self.discounted_return = np.zeros(num_envs, np.float64)
        self._returns: list[np.ndarray] = []  # this rollout's discounted returns, per step

    def sync(self, actor: ActorCritic) -> None:
        """Normalise with ``actor``'s statistics from now on (they arrive with weights)."""
        self.obs_norm.sync(actor.obs_rms)
        self.rew_norm.sync(actor.ret_rms)

    def begin(self) -> None:
        """A rollout starts: its return samples start empty."""
        self._returns.clear()

    def observation(self, obs: np.ndarray) -> np.ndarray:
        """``obs`` as the policy sees it: ``clip((obs - mean) / std)``, or as it is."""
        return self.obs_norm.observation(obs) if self.normalizes_obs else obs

    def reward(self, rewards: np.ndarray, cols: slice = slice(None)) -> np.ndarray:
        """``rewards`` of the envs ``cols`` as the rollout stores them: scaled by the
        return's std and clipped, or as they are; the discounted return each env has run up
        is advanced either way that it is tracked."""
        if not self.normalizes_reward:
            return rewards
        returns = self.discounted_return[cols]
        returns *= self.gamma
        returns += rewards
        self._returns.append(returns.copy())
        return self.rew_norm.scale(rewards)

    def end_episodes(self, done: np.ndarray, cols: slice = slice(None)) -> None:
        """The episodes ``done`` of the envs ``cols`` ended: their discounted returns start
        again."""
        self.discounted_return[cols][done] = 0.0

    def moments(self, raw_obs: np.ndarray) -> tuple[Moments, Moments]:
        """The moments of this rollout's raw observations (``[steps, envs, ...]``) and of
        its discounted returns, each of count 0 where that normalisation is off."""
        dims = raw_obs.shape[2:]
        if self.normalizes_obs:
            obs = Moments.from_sums(raw_obs.shape[0] * raw_obs.shape[1],
                                    raw_obs.sum(axis=(0, 1), dtype=np.float64),
                                    np.square(raw_obs, dtype=np.float64).sum(axis=(0, 1)))
        else:
            obs = Moments(0.0, np.zeros(dims), np.zeros(dims))
        ret = (Moments.of(np.concatenate(self._returns)) if self._returns
               else Moments(0.0, np.zeros(()), np.zeros(())))
        return obs, ret

    def state_dict(self) -> dict[str, Any]:
        """Each env's discounted return, for a checkpoint."""
        return {"discounted_return": torch.from_numpy(self.discounted_return.copy())}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.discounted_return = state["discounted_return"].numpy().copy()
