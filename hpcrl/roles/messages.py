"""Messages between roles, each backed by flat numpy buffers so any transport can carry it.

- :class:`~hpcrl.core.rollout.Rollout`: collector -> gradient worker.
- :class:`Gradient`: gradient worker -> updater (flat gradient plus a float64 info vector).
- :class:`Weights`: updater -> gradient workers and collectors (parameters and buffers).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from hpcrl.core.normalization import Moments
from hpcrl.core.flat import (buffers_to_flat, flat_to_buffers, flat_to_params,
                             num_buffer_values, num_params, params_to_flat)


# commands a weights message carries to collectors (bit flags)
COLLECT, STOP, CHECKPOINT, PREEMPTED = 0, 1, 2, 4


@dataclass
class Weights:
    """A version of the actor: ``params`` float32; ``buffers`` float64 ending with two slots,
    a command for collectors (:data:`COLLECT`, or :data:`STOP`/:data:`CHECKPOINT`/
    :data:`PREEMPTED` bits: stop because a stop signal came, not because training ended)
    and the version."""

    params: np.ndarray
    buffers: np.ndarray

    @staticmethod
    def empty_like(module: nn.Module) -> "Weights":
        return Weights(np.zeros(num_params(module), np.float32),
                       np.zeros(num_buffer_values(module) + 2, np.float64))

    @property
    def version(self) -> int:
        return int(self.buffers[-1])

    @property
    def command(self) -> int:
        return int(self.buffers[-2])

    def set_command(self, command: int) -> "Weights":
        self.buffers[-2] = command
        return self

    def capture(self, module: nn.Module, version: int, command: int = COLLECT) -> "Weights":
        """Write ``module``'s current parameters and buffers into this message."""
        params_to_flat(module, torch.from_numpy(self.params))
        buffers_to_flat(module, torch.from_numpy(self.buffers[:-2]))
        self.buffers[-2:] = (command, version)
        return self

    def load_into(self, module: nn.Module) -> None:
        """Copy this version into ``module``."""
        flat_to_params(module, torch.from_numpy(self.params))
        flat_to_buffers(module, torch.from_numpy(self.buffers[:-2]))


@dataclass
class Gradient:
    """One optimiser step's worth of gradient, and what the updater needs besides.

    ``info`` (float64) holds, in order: the weights version the gradient was computed with,
    the number of samples, the env steps its rollouts added (non-zero on the first gradient
    of an update only), the training progress in [0, 1] that sets the schedules, the
    algorithm's loss terms (``stat_names`` order), and the normaliser moments of the
    rollouts (observation count, mean, M2, then return count, mean, M2; counts are 0 on all
    but the first gradient of an update).
    """

    grads: np.ndarray
    info: np.ndarray
    num_stats: int

    HEADER = 4

    @staticmethod
    def empty(num_params_: int, num_stats: int, obs_dim: int) -> "Gradient":
        size = Gradient.HEADER + num_stats + 1 + 2 * obs_dim + 3
        return Gradient(np.zeros(num_params_, np.float32), np.zeros(size, np.float64),
                        num_stats)

    @property
    def weights_version(self) -> int:
        return int(self.info[0])

    @property
    def num_samples(self) -> int:
        return int(self.info[1])

    @property
    def new_env_steps(self) -> int:
        return int(self.info[2])

    @property
    def progress(self) -> float:
        return float(self.info[3])

    def stats(self) -> np.ndarray:
        return self.info[self.HEADER:self.HEADER + self.num_stats]

    def _moment_slices(self) -> tuple[slice, slice, slice, slice]:
        base = self.HEADER + self.num_stats
        d = (self.info.size - base - 4) // 2
        return (slice(base, base + 1), slice(base + 1, base + 1 + d),
                slice(base + 1 + d, base + 1 + 2 * d), slice(base + 1 + 2 * d, None))

    def moments(self) -> tuple[Moments, Moments]:
        """Observation and return moments carried by this gradient (count 0: none)."""
        c, mean, m2, ret = (self.info[s] for s in self._moment_slices())
        return (Moments(float(c[0]), mean.copy(), m2.copy()),
                Moments(float(ret[0]), np.float64(ret[1]), np.float64(ret[2])))

    def fill(self, grads: torch.Tensor, weights_version: int, num_samples: int,
             new_env_steps: int, progress: float, stats: list[float],
             moments: tuple[Moments, Moments] | None) -> "Gradient":
        self.grads[:] = grads.detach().cpu().numpy()
        self.info[:self.HEADER] = (weights_version, num_samples, new_env_steps, progress)
        self.info[self.HEADER:self.HEADER + self.num_stats] = stats
        c, mean, m2, ret = self._moment_slices()
        if moments is None:
            self.info[c] = 0.0
            self.info[ret.start] = 0.0
        else:
            obs, rets = moments
            self.info[c] = obs.count
            self.info[mean] = np.reshape(obs.mean, -1)
            self.info[m2] = np.reshape(obs.m2, -1)
            self.info[ret] = (rets.count, float(rets.mean), float(rets.m2))
        return self
