"""Ensemble critics ``Q_k(s, a)``: twin critics for SAC and TD3, a single one for DDPG.

The ``K`` critics are separate MLPs whose weights are stacked ``[K, in, out]``, so all of
them are evaluated with one batched matmul per layer instead of ``K`` forward passes.
Members are initialised like ``nn.Linear`` (uniform in ``+-1/sqrt(fan_in)``), or
orthogonally when ``ortho_init`` is set.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from hpcrl.sections.schema import ActorConfig


def _tanh(x: torch.Tensor, inplace: bool = False) -> torch.Tensor:
    return x.tanh_() if inplace else x.tanh()


_ACTIVATIONS: dict[str, Callable[..., torch.Tensor]] = {"tanh": _tanh, "relu": F.relu,
                                                         "elu": F.elu}


class EnsembleCritic(nn.Module):
    """``K`` Q-functions over concatenated flat observations and ``[-1, 1]`` actions.

    Hidden layers are stacked ``[K, in, out]`` (one ``baddbmm`` each); the output layer is
    kept as rows ``[K, 1, in]`` and applied as a product-and-sum, because batched matmuls
    with one output column are far slower on the CPU than the arithmetic they do.
    """

    def __init__(self, obs_dim: int, action_dim: int, config: ActorConfig,
                 num_critics: int) -> None:
        super().__init__()
        sizes = [obs_dim + action_dim] + list(config.hidden_sizes) + [1]
        self.num_critics = num_critics
        self.activation = _ACTIVATIONS[config.activation]
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for n_in, n_out in zip(sizes[:-2], sizes[1:-1], strict=True):
            self.weights.append(nn.Parameter(self._init(config, (num_critics, n_in, n_out),
                                                        n_in, math.sqrt(2))))
            self.biases.append(nn.Parameter(self._bias(config, (num_critics, 1, n_out), n_in)))
        width = sizes[-2]
        self.out_weight = nn.Parameter(self._init(config, (num_critics, 1, width), width, 1.0))
        self.out_bias = nn.Parameter(self._bias(config, (num_critics, 1), width))

    @staticmethod
    def _init(config: ActorConfig, shape: tuple[int, ...], fan_in: int,
              gain: float) -> torch.Tensor:
        w = torch.empty(shape)
        if config.ortho_init:
            for k in range(shape[0]):
                nn.init.orthogonal_(w[k], gain)
        else:
            bound = 1.0 / math.sqrt(fan_in)
            nn.init.uniform_(w, -bound, bound)
        return w

    @staticmethod
    def _bias(config: ActorConfig, shape: tuple[int, ...], fan_in: int) -> torch.Tensor:
        if config.ortho_init:
            return torch.zeros(shape)
        bound = 1.0 / math.sqrt(fan_in)
        return torch.empty(shape).uniform_(-bound, bound)

    def forward(self, obs: torch.Tensor, actions: torch.Tensor, frozen: bool = False,
                members: int | None = None) -> torch.Tensor:
        """``[K, B]`` values of ``(obs [B, obs_dim], actions [B, action_dim])``.

        ``frozen`` evaluates with detached weights: gradients reach the inputs (the actions
        of a policy loss) but not the critics. ``members`` evaluates only the first few
        critics (TD3's policy loss needs ``Q_1`` alone).
        """
        k = self.num_critics if members is None else members
        x = self._hidden(torch.cat([obs, actions], dim=-1), k, frozen)
        w, b = self._member_params(self.out_weight, self.out_bias, k, frozen)
        return (x * w).sum(dim=-1) + b

    def sampled(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """``[K, n, B]`` values of ``n`` actions per state, ``actions [n, B, action_dim]`` at
        ``obs [B, obs_dim]``, without gradients (a target's values of sampled actions).

        The output layer is one matrix product here: over the thousands of rows of many
        samples a product-and-sum costs about three times as much (its ``[K, rows, width]``
        product is written out and read back)."""
        n, batch = actions.shape[:2]
        with torch.no_grad():
            rows = torch.cat([obs.unsqueeze(0).expand(n, *obs.shape), actions], dim=-1)
            x = self._hidden(rows.reshape(n * batch, -1), self.num_critics, frozen=True)
            out = torch.baddbmm(self.out_bias.unsqueeze(-1), x, self.out_weight.transpose(1, 2))
        return out.view(self.num_critics, n, batch)

    def _hidden(self, x: torch.Tensor, k: int, frozen: bool) -> torch.Tensor:
        """The last hidden layer ``[k, B, width]`` of the first ``k`` critics for inputs
        ``x [B, obs_dim + action_dim]``."""
        x = x.unsqueeze(0).expand(k, *x.shape)
        for w, b in zip(self.weights, self.biases, strict=True):
            w, b = self._member_params(w, b, k, frozen)
            x = self.activation(torch.baddbmm(b, x, w), inplace=True)
        return x

    def _member_params(self, w: torch.Tensor, b: torch.Tensor, k: int,
                       frozen: bool) -> tuple[torch.Tensor, torch.Tensor]:
        if frozen:
            w, b = w.detach(), b.detach()
        if k < self.num_critics:  # slicing costs a full-size zero gradient, so only when due
            w, b = w[:k], b[:k]
        return w, b
