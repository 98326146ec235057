"""Ensemble critics ``Q_k(s, a)``: twin critics for SAC and TD3, a single one for DDPG.

The ``K`` critics are separate MLPs whose weights are stacked ``[K, in, out]``, so all of
them are evaluated with one batched matmul per layer instead of ``K`` forward passes.
Members are initialised like ``nn.Linear`` (uniform in ``+-1/sqrt(fan_in)``), or
orthogonally when ``ortho_init`` is set.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from hpcrl.config.schema import ActorConfig

_ACTIVATIONS = {"tanh": torch.tanh, "relu": F.relu, "elu": F.elu}


class EnsembleCritic(nn.Module):
    """``K`` Q-functions over concatenated flat observations and ``[-1, 1]`` actions."""

    def __init__(self, obs_dim: int, action_dim: int, config: ActorConfig,
                 num_critics: int) -> None:
        super().__init__()
        sizes = [obs_dim + action_dim] + list(config.hidden_sizes) + [1]
        self.num_critics = num_critics
        self.activation = _ACTIVATIONS[config.activation]
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
            w = torch.empty(num_critics, n_in, n_out)
            b = torch.empty(num_critics, 1, n_out)
            if config.ortho_init:
                gain = 1.0 if i == len(sizes) - 2 else math.sqrt(2)
                for k in range(num_critics):
                    nn.init.orthogonal_(w[k], gain)
                nn.init.zeros_(b)
            else:
                bound = 1.0 / math.sqrt(n_in)
                nn.init.uniform_(w, -bound, bound)
                nn.init.uniform_(b, -bound, bound)
            self.weights.append(nn.Parameter(w))
            self.biases.append(nn.Parameter(b))

    def forward(self, obs: torch.Tensor, actions: torch.Tensor,
                frozen: bool = False) -> torch.Tensor:
        """``[K, B]`` values of ``(obs [B, obs_dim], actions [B, action_dim])``.

        ``frozen`` evaluates with detached weights: gradients reach the inputs (the actions
        of a policy loss) but not the critics.
        """
        x = torch.cat([obs, actions], dim=-1)
        x = x.unsqueeze(0).expand(self.num_critics, *x.shape)
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            if frozen:
                w, b = w.detach(), b.detach()
            x = torch.baddbmm(b, x, w)
            if i < last:
                x = self.activation(x)
        return x.squeeze(-1)
