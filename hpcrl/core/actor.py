"""MLP actor-critic: the networks of an on-policy agent and their action distribution.

Calling the module on raw observations returns deterministic actions, so a trained actor
is usable outside hpcrl as it is (``hpcrl.load_policy``). Training code works on
observations that the collector already normalised, through :meth:`ActorCritic.evaluate`.
"""
from __future__ import annotations

import math
from typing import Union

import numpy as np
import torch
from torch import nn

from hpcrl.config.schema import ActorConfig
from hpcrl.core.distributions import CategoricalActions, DiagGaussianActions
from hpcrl.core.envs import EnvSpaces
from hpcrl.core.normalization import RunningMoments

_ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU}


def mlp(sizes: list[int], activation: str) -> nn.Sequential:
    """Linear layers of the given widths with an activation after each."""
    layers: list[nn.Module] = []
    for n_in, n_out in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(n_in, n_out), _ACTIVATIONS[activation]()]
    return nn.Sequential(*layers)


def _init_linear(module: nn.Module, gain: float) -> None:
    for layer in module.modules():
        if isinstance(layer, nn.Linear):
            nn.init.orthogonal_(layer.weight, gain)
            nn.init.zeros_(layer.bias)


class ActorCritic(nn.Module):
    """Policy and value networks over flat Box observations.

    ``shared_trunk`` feeds both heads from one MLP; otherwise policy and value have their own.
    Discrete action spaces use a Categorical over logits, Box spaces a diagonal Gaussian with
    a state-independent learned log std. Observation statistics (``obs_rms``) and return
    statistics (``ret_rms``, for reward scaling) are buffers, so they are saved and published
    with the weights.
    """

    def __init__(self, spaces: EnvSpaces, config: ActorConfig, normalize_obs: bool = False,
                 clip_obs: float = 10.0) -> None:
        super().__init__()
        obs_dim = int(np.prod(spaces.obs_shape))
        hidden = list(config.hidden_sizes)
        self.obs_shape = spaces.obs_shape
        self.discrete = spaces.discrete
        self.normalize_obs = normalize_obs
        self.clip_obs = clip_obs
        self.obs_rms = RunningMoments(spaces.obs_shape)
        self.ret_rms = RunningMoments(())
        if self.discrete:
            n_out = int(spaces.action_space.n)
            self.distribution = CategoricalActions(n_out)
        else:
            n_out = int(np.prod(spaces.action_shape))
            self.distribution = DiagGaussianActions(n_out)
            self.log_std = nn.Parameter(torch.full((n_out,), float(config.log_std_init)))
        self.shared = config.shared_trunk
        self.pi_trunk = mlp([obs_dim] + hidden, config.activation)
        self.vf_trunk = self.pi_trunk if self.shared else mlp([obs_dim] + hidden,
                                                              config.activation)
        self.pi_head = nn.Linear(hidden[-1], n_out)
        self.vf_head = nn.Linear(hidden[-1], 1)
        if config.ortho_init:
            _init_linear(self.pi_trunk, math.sqrt(2))
            if not self.shared:
                _init_linear(self.vf_trunk, math.sqrt(2))
            _init_linear(self.pi_head, 0.01)
            _init_linear(self.vf_head, 1.0)

    def _params(self, pi_features: torch.Tensor) -> torch.Tensor:
        out = self.pi_head(pi_features)
        if self.discrete:
            return out
        return torch.stack([out, self.log_std.expand_as(out)], dim=1)

    def dist_and_value(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Distribution parameters and values ``[B]`` for normalised observations ``[B, ...]``."""
        x = obs.flatten(1)
        pi = self.pi_trunk(x)
        vf = pi if self.shared else self.vf_trunk(x)
        return self._params(pi), self.vf_head(vf).squeeze(-1)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """Values ``[B]`` of normalised observations."""
        return self.vf_head(self.vf_trunk(obs.flatten(1))).squeeze(-1)

    def step(self, obs: torch.Tensor, noise: torch.Tensor
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Sampled actions, their log-probs and the values, for the collector."""
        params, values = self.dist_and_value(obs)
        actions = self.distribution.sample(params, noise)
        return actions, self.distribution.log_prob(params, actions), values

    def evaluate(self, obs: torch.Tensor, actions: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Log-probs of ``actions``, entropies and values, for the loss."""
        params, values = self.dist_and_value(obs)
        return (self.distribution.log_prob(params, actions),
                self.distribution.entropy(params), values)

    def normalize(self, obs: torch.Tensor) -> torch.Tensor:
        """Raw observations as the networks see them."""
        obs = obs.float()
        if not self.normalize_obs:
            return obs
        mean = self.obs_rms.mean.float()
        std = self.obs_rms.std().float()
        return ((obs - mean) / std).clamp(-self.clip_obs, self.clip_obs)

    def forward(self, obs: Union[torch.Tensor, np.ndarray]) -> torch.Tensor:
        """Deterministic actions for raw observations ``[B, *obs_shape]`` (or one, unbatched)."""
        obs = torch.as_tensor(obs)
        single = obs.dim() == len(self.obs_shape)
        if single:
            obs = obs.unsqueeze(0)
        x = self.normalize(obs).flatten(1)
        actions = self.distribution.mode(self._params(self.pi_trunk(x)))
        return actions[0] if single else actions
