"""The rollout storage of IMPALA: whole ``[T, N]`` sequences with what V-trace needs.

V-trace targets depend on the learner's current values, so they are computed in the loss;
this storage keeps the sequences and the behaviour policy's facts. Episode ends become
discounts: ``gamma`` inside an episode, 0 at its end. A truncated episode bootstraps from
the value of its final observation, folded into that step's reward
(``r_t + gamma * V(final obs)`` with discount 0), which gives :func:`hpcrl.buffers.returns.vtrace`
exactly the one-step target and cuts the trace there.

The value after the last step (``bootstrap``) and the values of truncated final
observations are the collector's (:class:`~hpcrl.buffers.rollout.Rollout`'s ``next_values``):
a rollout holds no observation after its last step. In serial placement with one gradient
step per rollout they equal the learner's values.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np
import torch

from hpcrl.buffers.rollout import Rollout


class SequenceBatch(NamedTuple):
    """Time-major sequences ``[T, N, ...]`` of the behaviour policy, and ``bootstrap [N]``;
    for a recurrent actor also the collector's states at the start of each of its
    sequences of ``sequence_length`` steps, ``memory [C, N, state_size]``, and
    ``starts [T, N]`` (an episode begins). ``step_rewards [T, N]``: the steps' rewards as
    the rollout stores them (``rewards`` holds a truncated episode's bootstrap too), for a
    reward predictor (``algo.addons.reward_predictor_coef``); None otherwise."""

    obs: torch.Tensor
    actions: torch.Tensor
    log_probs: torch.Tensor
    values: torch.Tensor
    rewards: torch.Tensor
    discounts: torch.Tensor
    bootstrap: torch.Tensor
    memory: torch.Tensor | None = None
    starts: torch.Tensor | None = None
    sequence_length: int = 0
    step_rewards: torch.Tensor | None = None

    @property
    def num_samples(self) -> int:
        """The number of steps, ``T x N``."""
        return self.values.numel()

    def columns(self, index: torch.Tensor) -> SequenceBatch:
        """The sequences of the env columns ``index``."""
        return SequenceBatch(self.obs[:, index], self.actions[:, index],
                             self.log_probs[:, index], self.values[:, index],
                             self.rewards[:, index], self.discounts[:, index],
                             self.bootstrap[index],
                             None if self.memory is None else self.memory[:, index],
                             None if self.starts is None else self.starts[:, index],
                             self.sequence_length,
                             None if self.step_rewards is None else self.step_rewards[:, index])


def _tensor(array: np.ndarray, device: torch.device) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(array)).to(device)


class VTraceStorage:
    """Holds the rollouts of one update side by side as :class:`SequenceBatch` columns, each
    where it landed (:attr:`parts`: views of its buffers on a CPU, one copy to a GPU); they
    are joined into one batch when the first minibatch is asked for.

    Rollouts of unequal length are cut to the shortest; the cut keeps a valid bootstrap
    (``next_values`` at the last kept step is the value of the next observation).
    """

    def __init__(self, gamma: float, device: torch.device | str = "cpu",
                 discrete_actions: bool = True, keep_rewards: bool = False) -> None:
        self.gamma = gamma
        self.device = torch.device(device)
        self.discrete_actions = discrete_actions
        self.keep_rewards = keep_rewards  # batches carry step_rewards (a reward predictor)
        self.parts: list[SequenceBatch] | None = None
        self._batch: SequenceBatch | None = None  # the parts joined, once per load
        self.env_offset = 0
        self.copied_bytes = 0  # what the last load copied of its rollouts' step fields

    def load(self, rollouts: Sequence[Rollout]) -> None:
        """Hold ``rollouts`` side by side in env order, each cut to the shortest one's valid
        steps; a rollout with no steps raises ValueError."""
        rollouts = sorted(rollouts, key=lambda r: r.env_offset)
        steps = min(r.valid_steps for r in rollouts)
        if steps <= 0:
            raise ValueError("a rollout with no collected steps cannot be trained on")
        self.parts = [self._sequences(r, steps) for r in rollouts]
        self._batch = self.parts[0] if len(self.parts) == 1 else None
        self.env_offset = rollouts[0].env_offset
        self.copied_bytes = 0 if self.device.type == "cpu" else sum(
            x[:steps].nbytes for r in rollouts for x in (r.obs, r.actions, r.log_probs,
                                                          r.values))

    @property
    def batch(self) -> SequenceBatch | None:
        """Every loaded sequence side by side (the rollouts joined when there are several),
        or None before a load."""
        if self._batch is None and self.parts is not None:
            parts = self.parts

            def side_by_side(tensors: list[Any]) -> Any:
                return None if tensors[0] is None else torch.cat(tensors, dim=1)

            self._batch = SequenceBatch(
                side_by_side([p.obs for p in parts]), side_by_side([p.actions for p in parts]),
                side_by_side([p.log_probs for p in parts]),
                side_by_side([p.values for p in parts]),
                side_by_side([p.rewards for p in parts]),
                side_by_side([p.discounts for p in parts]),
                torch.cat([p.bootstrap for p in parts]),
                side_by_side([p.memory for p in parts]), side_by_side([p.starts for p in parts]),
                parts[0].sequence_length, side_by_side([p.step_rewards for p in parts]))
        return self._batch

    def _sequences(self, r: Rollout, t: int) -> SequenceBatch:
        dev, gamma = self.device, self.gamma
        term, trunc = r.terminated[:t] > 0, r.truncated[:t] > 0
        cut = trunc & ~term
        rewards = np.where(cut, r.rewards[:t] + gamma * r.next_values[:t], r.rewards[:t])
        discounts = np.where(term | trunc, 0.0, gamma).astype(np.float32)
        bootstrap = np.where(term[-1] | trunc[-1], 0.0, r.next_values[t - 1])
        actions = _tensor(r.actions[:t], dev)
        if self.discrete_actions:
            actions = actions.long()
        memory = starts = None
        length = 0
        if r.layout.state_size:
            length = r.layout.sequence_length or r.layout.num_steps
            memory = _tensor(r.memory, dev)
            starts = torch.zeros((t, r.layout.num_envs), dtype=torch.bool)
            starts[1:] = torch.from_numpy((term | trunc)[:-1])
            starts = starts.to(dev)
        return SequenceBatch(_tensor(r.obs[:t], dev), actions, _tensor(r.log_probs[:t], dev),
                             _tensor(r.values[:t], dev), _tensor(rewards.astype(np.float32), dev),
                             _tensor(discounts, dev), _tensor(bootstrap.astype(np.float32), dev),
                             memory, starts, length,
                             _tensor(r.rewards[:t], dev) if self.keep_rewards else None)

    @property
    def num_steps(self) -> int:
        """Steps ``T`` of the loaded rollouts (0 before any)."""
        return 0 if self.parts is None else self.parts[0].values.shape[0]

    @property
    def num_envs(self) -> int:
        """Env columns ``N`` of the loaded rollouts (0 before any)."""
        return 0 if self.parts is None else sum(p.values.shape[1] for p in self.parts)

    @property
    def num_samples(self) -> int:
        """``T x N``."""
        return self.num_steps * self.num_envs

    def release(self) -> None:
        """Let go of the update's sequences once its gradients are done (rollouts held in
        place may be written again)."""
        self.parts = self._batch = None

    def full_batch(self) -> SequenceBatch:
        """Every loaded sequence, ``[T, N, ...]``."""
        batch = self.batch
        assert batch is not None, "load() a rollout first"
        return batch

    def minibatches(self, num_minibatches: int, seed: int, total_envs: int
                    ) -> Iterator[SequenceBatch]:
        """Whole sequences of disjoint env-column groups, in an order seeded over the job's
        ``total_envs`` columns (so a process holding a slice takes its share)."""
        batch = self.full_batch()
        gen = torch.Generator().manual_seed(seed)
        order = torch.randperm(total_envs, generator=gen)
        local = order[(order >= self.env_offset) & (order < self.env_offset + self.num_envs)]
        for group in torch.tensor_split(local - self.env_offset, num_minibatches):
            if group.numel():
                yield batch.columns(group.to(self.device))
