"""Actor-critic: encoder, MLP trunk and heads of an on-policy agent, and its distribution.

Calling the module on raw observations returns deterministic actions, so a trained actor
is usable outside hpcrl as it is (``hpcrl.load_policy``). Training code works on
observations that the collector already normalised, through :meth:`ActorCritic.evaluate`.
"""
from __future__ import annotations

import math
import numpy as np
import torch
from torch import nn

from hpcrl.config.schema import ActorConfig
from hpcrl.core.distributions import make_distribution
from hpcrl.core.encoders import make_encoder
from hpcrl.core.envs import EnvSpaces
from hpcrl.core.normalization import RunningMoments
from hpcrl.core.obs_format import ObsInput

_ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU}


def mlp(sizes: list[int], activation: str) -> nn.Sequential:
    """Linear layers of the given widths with an activation after each."""
    layers: list[nn.Module] = []
    for n_in, n_out in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(n_in, n_out), _ACTIVATIONS[activation]()]
    return nn.Sequential(*layers)


def _init_linear(module: nn.Module, gain: float) -> None:
    for layer in module.modules():
        if isinstance(layer, (nn.Linear, nn.Conv2d)):
            nn.init.orthogonal_(layer.weight, gain)
            nn.init.zeros_(layer.bias)


class ActorCritic(nn.Module):
    """Policy and value networks over observations encoded by the env's ``ObsFormat``.

    ``shared_trunk`` feeds both heads from one MLP; otherwise policy and value have their own.
    Discrete action spaces use a Categorical over logits (MultiDiscrete and MultiBinary one
    per component), Box spaces a diagonal Gaussian with
    a state-independent learned log std. Observation statistics (``obs_rms``) and return
    statistics (``ret_rms``, for reward scaling) are buffers, so they are saved and published
    with the weights.
    """

    def __init__(self, spaces: EnvSpaces, config: ActorConfig, normalize_obs: bool = False,
                 clip_obs: float = 10.0) -> None:
        super().__init__()
        self.obs_format = spaces.obs_format
        hidden = list(config.hidden_sizes)
        self.obs_shape = spaces.obs_shape
        self.discrete = spaces.discrete
        self.integer_actions = spaces.integer_actions  # logits, no log std
        self.normalize_obs = normalize_obs
        self.clip_obs = clip_obs
        self.obs_rms = RunningMoments(spaces.obs_shape)
        self.ret_rms = RunningMoments(())
        categories = spaces.categories
        if categories is not None:
            n_out = sum(categories)
            self.distribution = make_distribution(categories, spaces.discrete, 0)
        else:
            n_out = int(np.prod(spaces.action_shape))
            self.distribution = make_distribution(None, False, n_out)
            self.log_std = nn.Parameter(torch.full((n_out,), float(config.log_std_init)))
        self.shared = config.shared_trunk

        def encoder() -> nn.Module:
            return make_encoder(config.encoder, self.obs_format, config.features,
                                config.channels)

        self.pi_encoder = encoder()
        features = self.pi_encoder.features
        self.pi_trunk = mlp([features] + hidden, config.activation)
        self.vf_encoder = self.pi_encoder if self.shared else encoder()
        self.vf_trunk = self.pi_trunk if self.shared else mlp([features] + hidden,
                                                              config.activation)
        width = hidden[-1] if hidden else features
        self.pi_head = nn.Linear(width, n_out)
        self.vf_head = nn.Linear(width, 1)
        if config.ortho_init:
            for part in (self.pi_encoder, self.pi_trunk) + (
                    () if self.shared else (self.vf_encoder, self.vf_trunk)):
                _init_linear(part, math.sqrt(2))
            _init_linear(self.pi_head, 0.01)
            _init_linear(self.vf_head, 1.0)

    def _params(self, pi_features: torch.Tensor) -> torch.Tensor:
        out = self.pi_head(pi_features)
        if self.integer_actions:
            return out
        return torch.stack([out, self.log_std.expand_as(out)], dim=1)

    def dist_and_value(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Distribution parameters and values ``[B]`` for normalised observations ``[B, ...]``."""
        pi = self.pi_trunk(self.pi_encoder(obs))
        vf = pi if self.shared else self.vf_trunk(self.vf_encoder(obs))
        return self._params(pi), self.vf_head(vf).squeeze(-1)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """Values ``[B]`` of normalised observations."""
        return self.vf_head(self.vf_trunk(self.vf_encoder(obs))).squeeze(-1)

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
        log_probs, entropy = self.distribution.log_prob_entropy(params, actions)
        return log_probs, entropy, values

    def normalize(self, obs: torch.Tensor) -> torch.Tensor:
        """Carried observations as the networks take them (normalised when the run does;
        integer observations are left as they are, to be one-hot encoded)."""
        if not self.normalize_obs:
            return obs  # the encoders take the carried dtype (uint8 frames stay small)
        obs = obs.float()
        mean = self.obs_rms.mean.float()
        std = self.obs_rms.std().float()
        return ((obs - mean) / std).clamp(-self.clip_obs, self.clip_obs)

    def forward(self, obs: ObsInput) -> torch.Tensor:
        """Deterministic actions for raw observations: one, as the env returns it (an array,
        an integer, a tuple), or a batch ``[B, *obs_shape]``."""
        obs, single = self.obs_format.as_batch(obs)
        obs = obs.to(self.pi_head.weight.device)  # the actor may live on an accelerator
        x = self.pi_encoder(self.normalize(obs))
        actions = self.distribution.mode(self._params(self.pi_trunk(x)))
        return actions[0] if single else actions
