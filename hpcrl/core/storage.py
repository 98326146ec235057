"""The gradient worker's rollout storage: GAE targets and a layout-independent batch order.

Minibatches are stratified by env: every minibatch holds the same number of time steps
from every env, and which steps is decided by a generator seeded with the update and epoch
over the *global* env columns. A process that holds envs ``[a, b)`` of the job therefore
takes exactly its share of the minibatch that a single process holding all envs would
build, which is what makes N gradient ranks reach the weights of one.
"""
from __future__ import annotations

from typing import Iterator, NamedTuple, Sequence

import numpy as np
import torch

from hpcrl.core.rollout import Rollout
from hpcrl.returns import gae


class RolloutBatch(NamedTuple):
    """Training samples, flattened to ``[B, ...]`` (or ``[T, N, ...]`` before flattening)."""

    obs: torch.Tensor
    actions: torch.Tensor
    log_probs: torch.Tensor
    values: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor

    def flatten(self) -> "RolloutBatch":
        return RolloutBatch(*(t.reshape((-1,) + t.shape[2:]) for t in self))

    def gather(self, time_index: torch.Tensor, env_index: torch.Tensor) -> "RolloutBatch":
        """Samples at ``[time_index[i, j], env_index[i, j]]``, flattened."""
        return RolloutBatch(*(t[time_index, env_index] for t in self)).flatten()


def _side_by_side(rollouts: Sequence[Rollout]) -> bool:
    """Whole rollouts of adjacent env slices (a preempted, shorter one is not)."""
    full = all(r.valid_steps == r.layout.num_steps for r in rollouts)
    ends = [r.env_offset + r.layout.num_envs for r in rollouts[:-1]]
    return full and ends == [r.env_offset for r in rollouts[1:]]


def _tensor(array: np.ndarray, device: torch.device) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(array)).to(device)


class RolloutStorage:
    """Holds the rollouts of one update as ``[T, N, ...]`` tensors with GAE targets."""

    def __init__(self, gamma: float, gae_lambda: float, device: torch.device | str = "cpu",
                 discrete_actions: bool = True) -> None:
        self.gamma, self.gae_lambda = gamma, gae_lambda
        self.device = torch.device(device)
        self.discrete_actions = discrete_actions
        self.batch: RolloutBatch | None = None
        self.flat: RolloutBatch | None = None
        self.env_offset = 0

    def load(self, rollouts: Sequence[Rollout]) -> None:
        """Take the rollouts of this update.

        Rollouts of distinct, adjacent env slices with equal lengths sit side by side as
        ``[T, N]`` and get the layout-independent batch order. Anything else (rollouts cut
        short by preemption, several rollouts of one collector under asynchronous
        collection) is flattened into one pool of samples drawn in a seeded random order.
        """
        rollouts = sorted(rollouts, key=lambda r: r.env_offset)
        if min(r.valid_steps for r in rollouts) <= 0:
            raise ValueError("a rollout with no collected steps cannot be trained on")
        parts = [self._targets(r) for r in rollouts]
        fields = range(len(RolloutBatch._fields))
        self.env_offset = rollouts[0].env_offset
        if _side_by_side(rollouts):
            self.batch = RolloutBatch(*(torch.cat([p[i] for p in parts], dim=1) for i in fields))
            self.flat = None
        else:
            self.batch = None
            self.flat = RolloutBatch(*(torch.cat([p.flatten()[i] for p in parts], dim=0)
                                       for i in fields))

    def _targets(self, r: Rollout) -> RolloutBatch:
        t, dev = r.valid_steps, self.device
        values = _tensor(r.values[:t], dev)
        advantages, returns = gae(_tensor(r.rewards[:t], dev), values,
                                  _tensor(r.terminated[:t], dev), _tensor(r.truncated[:t], dev),
                                  _tensor(r.next_values[:t], dev), self.gamma, self.gae_lambda)
        actions = _tensor(r.actions[:t], dev)
        if self.discrete_actions:
            actions = actions.long()
        return RolloutBatch(_tensor(r.obs[:t], dev), actions, _tensor(r.log_probs[:t], dev),
                            values, advantages, returns)

    @property
    def num_steps(self) -> int:
        return 0 if self.batch is None else self.batch.values.shape[0]

    @property
    def num_envs(self) -> int:
        return 0 if self.batch is None else self.batch.values.shape[1]

    @property
    def num_samples(self) -> int:
        """Samples held (steps x envs, or the size of the flattened pool)."""
        if self.flat is not None:
            return self.flat.values.shape[0]
        return self.num_steps * self.num_envs

    def full_batch(self) -> RolloutBatch:
        """Every sample of the update, flattened."""
        if self.flat is not None:
            return self.flat
        assert self.batch is not None, "load() a rollout first"
        return self.batch.flatten()

    def minibatches(self, num_minibatches: int, seed: int, total_envs: int
                    ) -> Iterator[RolloutBatch]:
        """``num_minibatches`` disjoint minibatches covering the batch once, for one epoch.

        ``seed`` must be the same on every process of the job for the same epoch;
        ``total_envs`` is the number of envs of the whole job. One minibatch is the whole
        batch as it lies: its loss is a mean, which no order changes.
        """
        if num_minibatches == 1:
            yield self.full_batch()
            return
        if self.flat is not None:
            gen = torch.Generator().manual_seed(seed)
            order = torch.randperm(self.num_samples, generator=gen).to(self.device)
            for index in torch.tensor_split(order, num_minibatches):
                yield RolloutBatch(*(t[index] for t in self.flat))
            return
        assert self.batch is not None, "load() a rollout first"
        steps, envs = self.num_steps, self.num_envs
        if steps % num_minibatches:
            raise ValueError(f"{steps} steps per env cannot be split into {num_minibatches} "
                             f"equal minibatches")
        gen = torch.Generator().manual_seed(seed)
        keys = torch.rand(steps, total_envs, generator=gen)
        order = keys.argsort(dim=0)[:, self.env_offset:self.env_offset + envs].to(self.device)
        env_index = torch.arange(envs, device=self.device).expand(steps // num_minibatches, envs)
        per = steps // num_minibatches
        for j in range(num_minibatches):
            yield self.batch.gather(order[j * per:(j + 1) * per], env_index)
