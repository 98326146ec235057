"""Q-network of DQN: an MLP from flat Box observations to one value per discrete action.

Called on raw observations it returns the greedy (argmax-Q) action, so a trained network is
usable outside hpcrl as it is (``hpcrl.load_policy``).
"""
from __future__ import annotations

import math
from typing import Union

import numpy as np
import torch
from torch import nn

from hpcrl.config.schema import ActorConfig
from hpcrl.core.actor import mlp


def orthogonal_init(module: nn.Module, gain: float) -> None:
    """Orthogonal weights with ``gain`` and zero biases for every Linear of ``module``."""
    for layer in module.modules():
        if isinstance(layer, nn.Linear):
            nn.init.orthogonal_(layer.weight, gain)
            nn.init.zeros_(layer.bias)


def batch_obs(obs: Union[torch.Tensor, np.ndarray], obs_shape: tuple[int, ...]
              ) -> tuple[torch.Tensor, bool]:
    """Observations as a float ``[B, obs_dim]`` tensor, and whether one came unbatched."""
    obs = torch.as_tensor(obs)
    single = obs.dim() == len(obs_shape)
    if single:
        obs = obs.unsqueeze(0)
    return obs.float().flatten(1), single


class QNetwork(nn.Module):
    """``Q(s, .)`` for ``num_actions`` actions; PyTorch's default init unless ``ortho_init``."""

    def __init__(self, obs_shape: tuple[int, ...], num_actions: int,
                 config: ActorConfig) -> None:
        super().__init__()
        hidden = list(config.hidden_sizes)
        self.obs_shape = obs_shape
        self.num_actions = num_actions
        self.trunk = mlp([int(np.prod(obs_shape))] + hidden, config.activation)
        self.head = nn.Linear(hidden[-1], num_actions)
        if config.ortho_init:
            orthogonal_init(self.trunk, math.sqrt(2))
            orthogonal_init(self.head, 1.0)

    def q_values(self, obs: torch.Tensor) -> torch.Tensor:
        """``[B, num_actions]`` values of flat float observations ``[B, obs_dim]``."""
        return self.head(self.trunk(obs))

    @torch.no_grad()
    def forward(self, obs: Union[torch.Tensor, np.ndarray]) -> torch.Tensor:
        """Greedy actions for raw observations ``[B, *obs_shape]`` (or one, unbatched)."""
        x, single = batch_obs(obs, self.obs_shape)
        actions = self.q_values(x).argmax(dim=-1)
        return actions[0] if single else actions
