"""Running mean and variance, merged from per-rollout moments (Chan et al.'s parallel rule).

The statistics are buffers of the actor, so they travel with the published weights and are
saved inside the policy: a policy loaded outside hpcrl normalises its inputs by itself.
Collectors only *read* them; whoever applies updates merges the moments collectors report.
"""
from __future__ import annotations

from typing import NamedTuple, cast

import numpy as np
import torch
from torch import nn


class Moments(NamedTuple):
    """Count, mean and sum of squared deviations (M2) of a set of samples."""

    # the field shadows tuple.count, a method: typeshed's tuple declares it, so mypy
    # refuses any NamedTuple field of that name; renaming it would change the public API
    count: float  # type: ignore[assignment]
    mean: np.ndarray | np.float64  # a scalar quantity's (returns') are numpy scalars
    m2: np.ndarray | np.float64

    @staticmethod
    def of(samples: np.ndarray) -> Moments:
        """Moments of ``samples`` of shape ``[batch, *shape]``."""
        x = np.asarray(samples, dtype=np.float64)
        mean = x.mean(axis=0)
        return Moments(float(x.shape[0]), mean, ((x - mean) ** 2).sum(axis=0))

    @staticmethod
    def from_sums(count: float, total: np.ndarray, total_sq: np.ndarray) -> Moments:
        """Moments from a count, a sum and a sum of squares (all float64)."""
        if count == 0:
            return Moments(0.0, np.zeros_like(total), np.zeros_like(total))
        mean = total / count
        return Moments(float(count), mean, np.maximum(total_sq - count * mean * mean, 0.0))


def merge_moments(parts: list[Moments]) -> Moments:
    """The moments of the union of several sample sets (exact, any order)."""
    count = sum(p.count for p in parts)
    if count == 0:
        return parts[0]
    # sums of numpy values (parts is not empty: count > 0), never the start value 0 alone
    mean = cast(np.ndarray,
                sum(np.asarray(p.mean, np.float64) * p.count for p in parts) / count)
    m2 = sum(np.asarray(p.m2, np.float64) + p.count * (np.asarray(p.mean, np.float64) - mean) ** 2
             for p in parts)
    return Moments(count, mean, cast(np.ndarray, m2))


class RunningMoments(nn.Module):
    """Running mean/variance of a quantity of fixed ``shape`` (float64 buffers)."""

    mean: torch.Tensor  # buffers, registered in __init__
    var: torch.Tensor
    count: torch.Tensor

    def __init__(self, shape: tuple[int, ...], epsilon: float = 1e-8) -> None:
        super().__init__()
        self.epsilon = epsilon
        self.register_buffer("mean", torch.zeros(shape, dtype=torch.float64))
        self.register_buffer("var", torch.ones(shape, dtype=torch.float64))
        self.register_buffer("count", torch.tensor(1e-4, dtype=torch.float64))

    @torch.no_grad()
    def merge(self, moments: Moments) -> None:
        """Fold the moments of a new batch of samples into the running statistics."""
        if moments.count <= 0:
            return
        n_a, n_b = float(self.count), moments.count
        # messages carry moments flat; the statistics keep the observation's shape, and their
        # device (a GPU learner's model keeps them there)
        device = self.mean.device
        mean_b = torch.as_tensor(moments.mean, dtype=torch.float64,
                                 device=device).reshape(self.mean.shape)
        m2_b = torch.as_tensor(moments.m2, dtype=torch.float64,
                               device=device).reshape(self.mean.shape)
        total = n_a + n_b
        delta = mean_b - self.mean
        m2 = self.var * n_a + m2_b + delta * delta * n_a * n_b / total
        self.mean += delta * n_b / total
        self.var.copy_(m2 / total)
        self.count.fill_(total)

    def std(self) -> torch.Tensor:
        """Standard deviation with the epsilon floor used when normalising."""
        return torch.sqrt(self.var + self.epsilon)


class Normalizer:
    """A fast numpy view of a :class:`RunningMoments`, for the collector's step loop."""

    def __init__(self, clip: float) -> None:
        self.clip = clip
        self.mean = np.zeros(1, dtype=np.float32)
        self.inv_std = np.ones(1, dtype=np.float32)

    def sync(self, stats: RunningMoments) -> None:
        """Copy the current statistics (call after new weights are loaded)."""
        self.mean = stats.mean.numpy().astype(np.float32)
        self.inv_std = (1.0 / stats.std()).numpy().astype(np.float32)

    def observation(self, obs: np.ndarray) -> np.ndarray:
        """``clip((obs - mean) / std)``."""
        return np.clip((obs - self.mean) * self.inv_std, -self.clip, self.clip)

    def scale(self, rewards: np.ndarray) -> np.ndarray:
        """``clip(rewards / std)`` (rewards are scaled, not centred)."""
        return np.clip(rewards * self.inv_std, -self.clip, self.clip)
