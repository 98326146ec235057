"""The gradient-worker role: turns the rollouts of an update into a sequence of gradients.

It owns the rollout storage and the algorithm's loss. Between two gradients of one update
the caller must hand it the weights those gradients produced (:meth:`load_weights`), from
an updater in another process or from its own optimiser in a decentralised update.
"""
from __future__ import annotations

from typing import Iterator, Sequence

import torch

from hpcrl.core.algorithms.base import Algorithm
from hpcrl.core.normalization import Moments
from hpcrl.core.rollout import Rollout
from hpcrl.core.storage import RolloutStorage
from hpcrl.roles.messages import Gradient, Weights


def rollout_moments(rollouts: Sequence[Rollout]) -> tuple[Moments, Moments]:
    """Observation and return moments of several rollouts, merged."""
    obs_parts, ret_parts = zip(*(r.moments() for r in rollouts))
    return _merge([Moments(*m) for m in obs_parts]), _merge([Moments(*m) for m in ret_parts])


def _merge(parts: list[Moments]) -> Moments:
    count = sum(p.count for p in parts)
    if count == 0:
        return parts[0]
    mean = sum(p.mean * p.count for p in parts) / count
    m2 = sum(p.m2 + p.count * (p.mean - mean) ** 2 for p in parts)
    return Moments(count, mean, m2)


class GradientWorker:
    """Computes the gradients of one update, one :class:`Gradient` per optimiser step."""

    def __init__(self, algorithm: Algorithm, storage: RolloutStorage, seed: int,
                 total_envs: int, total_env_steps: int) -> None:
        self.algorithm, self.storage = algorithm, storage
        self.seed, self.total_envs = seed, total_envs
        self.total_env_steps = total_env_steps
        self.weights_version = 0
        actor = algorithm.actor
        self.message = Gradient.empty(sum(p.numel() for p in actor.parameters()),
                                      len(algorithm.stat_names), int(actor.obs_rms.mean.numel()))

    def load_weights(self, weights: Weights) -> None:
        weights.load_into(self.algorithm.actor)
        self.weights_version = weights.version

    def gradients(self, rollouts: Sequence[Rollout], update: int,
                  env_steps_before: int) -> Iterator[Gradient]:
        """The gradients of update number ``update`` on ``rollouts``.

        ``env_steps_before`` counts the job's env steps before these rollouts; it sets the
        schedules' progress the same way on every process.
        """
        self.storage.load(rollouts)
        new_steps = self.storage.num_steps * self.storage.num_envs
        job_steps = self.storage.num_steps * self.total_envs
        progress = min((env_steps_before + job_steps) / self.total_env_steps, 1.0)
        self.algorithm.set_progress(progress)
        names = self.algorithm.stat_names
        moments: tuple[Moments, Moments] | None = rollout_moments(rollouts)
        for batch in self.algorithm.minibatches(self.storage, update, self.seed, self.total_envs):
            grads, stats = self.algorithm.compute_gradients(batch)
            yield self.message.fill(grads, self.weights_version, batch.values.numel(),
                                    new_steps if moments else 0, progress,
                                    [stats[n] for n in names], moments)
            moments = None
