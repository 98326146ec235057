"""The world model of model-based agents: an ensemble predicting the next observation (and
the reward, where the env gives no reward function) from an observation and an action.

Each member of a :class:`~hpcrl.models.model_based.ensemble.GaussianEnsemble` predicts the
*change* of the observation's features, ``next - obs`` (and the reward), as a Gaussian. Its
inputs (features and actions) and its targets (changes and rewards) are standardised by
running statistics of every transition the replay received (:meth:`WorldModel.merge`,
:class:`~hpcrl.numerics.normalization.RunningMoments`); the statistics are buffers of the model,
so they travel with its published weights and are saved inside the policy, and every copy of
the model plans with the statistics it was trained with.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from hpcrl.models.model_based.ensemble import GaussianEnsemble
from hpcrl.numerics.normalization import Moments, RunningMoments

_CONSTANT_VAR = 1e-12  # a value whose variance is below this is scaled by 1, not 1 / std


class Scales(NamedTuple):
    """The statistics of one call, as float32 tensors on the model's device: inputs'
    mean and std, targets' mean and std."""

    in_mean: torch.Tensor
    in_std: torch.Tensor
    out_mean: torch.Tensor
    out_std: torch.Tensor


def _mean_std(stats: RunningMoments, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and std of ``stats`` as float32 (std 1 where a value never varied)."""
    var = stats.var
    std = torch.where(var < _CONSTANT_VAR, torch.ones_like(var), var.sqrt())
    return (stats.mean.to(device, torch.float32), std.to(device, torch.float32))


class WorldModel(nn.Module):
    """An ensemble of ``members`` Gaussian dynamics models over ``features`` observation
    features and ``action_dim`` actions (in ``[-1, 1]``); with ``learned_reward`` each also
    predicts the reward."""

    def __init__(self, features: int, action_dim: int, members: int, hidden: list[int],
                 activation: str, learned_reward: bool) -> None:
        super().__init__()
        self.features, self.action_dim, self.members = features, action_dim, members
        self.learned_reward = learned_reward
        outputs = features + int(learned_reward)
        self.net = GaussianEnsemble(members, features + action_dim, outputs, hidden,
                                    activation)
        self.inputs = RunningMoments((features + action_dim,))
        self.targets = RunningMoments((outputs,))

    # -- statistics ---------------------------------------------------------------------------
    def moments(self, obs: np.ndarray, actions: np.ndarray, next_obs: np.ndarray,
                rewards: np.ndarray) -> tuple[Moments, Moments]:
        """The moments of the inputs and of the targets of transitions (features
        ``[K, features]``, actions ``[K, A]``, next features, rewards ``[K]``)."""
        return (Moments.of(np.concatenate([obs, actions], axis=1)),
                Moments.of(self._targets_numpy(obs, next_obs, rewards)))

    def merge(self, inputs: Moments, targets: Moments) -> None:
        """Fold the moments of new transitions into the input and target statistics."""
        self.inputs.merge(inputs)
        self.targets.merge(targets)

    def _targets_numpy(self, obs: np.ndarray, next_obs: np.ndarray,
                       rewards: np.ndarray) -> np.ndarray:
        delta = np.asarray(next_obs, np.float64) - np.asarray(obs, np.float64)
        if not self.learned_reward:
            return delta
        return np.concatenate([delta, np.asarray(rewards, np.float64)[:, None]], axis=1)

    def scales(self) -> Scales:
        """The current statistics, once per planning call or loss (not per horizon step)."""
        device = self.net.head.weight.device
        return Scales(*_mean_std(self.inputs, device), *_mean_std(self.targets, device))

    # -- prediction --------------------------------------------------------------------------
    def predict(self, obs: torch.Tensor, actions: torch.Tensor, scales: Scales
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Each member's mean next features ``[E, N, features]`` and, with a learned reward,
        its mean reward ``[E, N]`` (else None), for features ``[E, N, features]`` and actions
        ``[E, N, A]``: member ``e`` of the rows ``[e]``."""
        x = (torch.cat([obs, actions], dim=-1) - scales.in_mean) / scales.in_std
        out = self.net.mean(x) * scales.out_std + scales.out_mean
        next_obs = obs + out[..., :self.features]
        return next_obs, (out[..., self.features] if self.learned_reward else None)

    # -- training ----------------------------------------------------------------------------
    def loss(self, obs: torch.Tensor, actions: torch.Tensor, next_obs: torch.Tensor,
             rewards: torch.Tensor, rows: torch.Tensor, weight_decay: float
             ) -> tuple[torch.Tensor, dict[str, float]]:
        """The summed Gaussian NLL of the members, member ``e`` on the batch rows
        ``rows[e]`` (its bootstrap of the batch), in standardised units, plus
        ``weight_decay`` x the weights' sum of squares. Its terms: ``model_loss``, the mean
        squared error of the predicted changes (``dynamics_mse``) and, when learned, of the
        rewards (``reward_mse``), both standardised, averaged over the members."""
        targets = next_obs - obs
        if self.learned_reward:
            targets = torch.cat([targets, rewards[:, None]], dim=1)
        scales = self.scales()
        x = (torch.cat([obs, actions], dim=1) - scales.in_mean) / scales.in_std
        y = (targets - scales.out_mean) / scales.out_std
        loss, squared = self.net.nll(x[rows], y[rows])
        if weight_decay > 0:
            loss = loss + weight_decay * self.net.weights_l2()
        stats = {"model_loss": loss.item(),
                 "dynamics_mse": squared[..., :self.features].mean().item()}
        if self.learned_reward:
            stats["reward_mse"] = squared[..., self.features].mean().item()
        return loss, stats
