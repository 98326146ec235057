"""Continuous policies of the off-policy agents, acting in ``[-1, 1]`` and scaled to the env.

- :class:`DeterministicPolicy` (TD3, DDPG): ``tanh(MLP(s))``; exploration noise is added
  by the collector.
- :class:`SquashedGaussianPolicy` (SAC): ``tanh(u)`` with ``u ~ N(mean(s), std(s))``; its
  log-probability includes the tanh change of variables.

The critics and the replay see actions in ``[-1, 1]``; the env sees them mapped affinely
to its Box bounds. Observations are carried as their :class:`~hpcrl.envs.obs_format.ObsFormat`
says and become features through :meth:`ObsFormat.encode` (a Box flattened, integers one-hot,
each key of a ``Dict`` in turn, as DQN's MLP encoder does), so these policies take every
observation space DQN takes with ``actor.encoder=mlp``; the algorithms encode a batch once
with :meth:`_ContinuousPolicy.features` and give the same features to the critics. Calling a
policy on raw observations returns its deterministic env action (``tanh(mean)`` for SAC),
which is what ``hpcrl.load_policy`` gives. Collectors act with each through the numpy engine
it declares (:class:`DeterministicEngine`, :class:`SquashedGaussianEngine`).
"""
from __future__ import annotations

import math
from abc import ABC, abstractmethod

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from hpcrl.envs.obs_format import ObsFormat, ObsInput, box_format
from hpcrl.models.acting import ActedEnvs, ComputesHere, Step
from hpcrl.models.actor import mlp
from hpcrl.models.encoders import orthogonal_init
from hpcrl.models.mlp_kernel import forward, layer_views
from hpcrl.sections.schema import ActorConfig

LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0
SQUASH_EPS = 1e-6
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


class ActionScale:
    """The affine map from ``[-1, 1]`` to a Box's ``[low, high]`` (both finite)."""

    def __init__(self, space: gym.spaces.Box) -> None:
        low, high = np.asarray(space.low, np.float32), np.asarray(space.high, np.float32)
        if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
            raise ValueError(f"action space {space} has infinite bounds; the off-policy "
                             f"policies squash actions into [low, high] and need finite ones")
        self.center = (high + low) / 2
        self.half = (high - low) / 2
        self.center_t = torch.from_numpy(self.center)
        self.half_t = torch.from_numpy(self.half)

    def to_env(self, actions: np.ndarray) -> np.ndarray:
        """Actions in ``[-1, 1]`` mapped to the Box's ``[low, high]``."""
        return self.center + self.half * actions

    def to_env_tensor(self, actions: torch.Tensor) -> torch.Tensor:
        """The map on a tensor, on the tensor's device."""
        if actions.device.type == "cpu":
            return self.center_t + self.half_t * actions
        return (self.center_t.to(actions.device, non_blocking=True)
                + self.half_t.to(actions.device, non_blocking=True) * actions)


class _ContinuousPolicy(nn.Module, ABC):
    """An MLP trunk over encoded observations, and the map of its actions to the env.

    ``obs_format`` says how observations are carried (a plain Box of ``obs_shape`` when
    None)."""

    def __init__(self, obs_shape: tuple[int, ...], space: gym.spaces.Box,
                 config: ActorConfig, obs_format: ObsFormat | None = None) -> None:
        super().__init__()
        self.obs_shape = obs_shape
        self.obs_format = obs_format or box_format(obs_shape)
        self.action_dim = int(np.prod(space.shape))
        self.scale = ActionScale(space)
        self.trunk = mlp([self.obs_format.features] + list(config.hidden_sizes),
                         config.activation)
        if config.ortho_init:
            orthogonal_init(self.trunk, math.sqrt(2))

    def features(self, obs: torch.Tensor) -> torch.Tensor:
        """Float features ``[B, obs_format.features]`` of carried observations ``[B, ...]``:
        what the trunk and the algorithm's critics take."""
        return self.obs_format.encode(obs)

    @abstractmethod
    def squashed_mode(self, obs: torch.Tensor) -> torch.Tensor:
        """The deterministic action in ``[-1, 1]`` for features (:meth:`features`)."""

    @torch.no_grad()
    def forward(self, obs: ObsInput) -> torch.Tensor:
        """Deterministic env actions for raw observations: one, as the env returns it, or a
        batch (a dict of batches for a ``Dict`` space)."""
        x, single = self.obs_format.as_batch(obs)
        x = x.to(next(self.parameters()).device)  # the policy acts where it lives
        actions = self.scale.to_env_tensor(self.squashed_mode(self.features(x)))
        return actions[0] if single else actions


class DeterministicPolicy(_ContinuousPolicy):
    """``mu(s) = tanh(MLP(s))`` in ``[-1, 1]``."""

    def __init__(self, obs_shape: tuple[int, ...], space: gym.spaces.Box,
                 config: ActorConfig, obs_format: ObsFormat | None = None) -> None:
        super().__init__(obs_shape, space, config, obs_format)
        self.head = nn.Linear(config.hidden_sizes[-1], self.action_dim)
        if config.ortho_init:
            orthogonal_init(self.head, 0.01)

    def squashed_mode(self, obs: torch.Tensor) -> torch.Tensor:
        """``tanh(MLP(features))`` ``[B, A]``: the policy's action in ``[-1, 1]``."""
        return torch.tanh(self.head(self.trunk(obs)))

    def acting_engine(self, compile: bool = False, envs: ActedEnvs | None = None
                      ) -> DeterministicEngine:
        """How collectors act with it: in numpy (``compile`` and ``envs`` unused)."""
        return DeterministicEngine(self)


class SquashedGaussianPolicy(_ContinuousPolicy):
    """A diagonal Gaussian over ``u`` with state-dependent mean and log std, squashed by tanh.

    The log std is clamped to ``[-20, 2]``.
    """

    def __init__(self, obs_shape: tuple[int, ...], space: gym.spaces.Box,
                 config: ActorConfig, obs_format: ObsFormat | None = None) -> None:
        super().__init__(obs_shape, space, config, obs_format)
        width = config.hidden_sizes[-1]
        self.mean_head = nn.Linear(width, self.action_dim)
        self.log_std_head = nn.Linear(width, self.action_dim)
        if config.ortho_init:
            orthogonal_init(self.mean_head, 0.01)
            orthogonal_init(self.log_std_head, 0.01)

    def mean_log_std(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The Gaussian's mean and log std ``[B, A]`` before the squash, the log std clamped to
        ``[LOG_STD_MIN, LOG_STD_MAX]``."""
        h = self.trunk(obs)
        return self.mean_head(h), self.log_std_head(h).clamp(LOG_STD_MIN, LOG_STD_MAX)

    def sample(self, obs: torch.Tensor, noise: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """Actions ``tanh(mean + std * noise)`` and their log-probabilities ``[B]``.

        ``log pi(a|s) = log N(u; mean, std) - sum log(1 - tanh(u)^2 + 1e-6)``.
        """
        mean, log_std = self.mean_log_std(obs)
        actions = torch.tanh(mean + log_std.exp() * noise)
        gauss = -0.5 * noise * noise - log_std - _LOG_SQRT_2PI
        log_prob = (gauss - torch.log(1.0 - actions * actions + SQUASH_EPS)).sum(dim=-1)
        return actions, log_prob

    def squashed_mode(self, obs: torch.Tensor) -> torch.Tensor:
        """``tanh(mean)`` ``[B, A]``: the deterministic action (evaluation, MPO's targets)."""
        return torch.tanh(self.mean_log_std(obs)[0])

    def acting_engine(self, compile: bool = False, envs: ActedEnvs | None = None
                      ) -> SquashedGaussianEngine:
        """How collectors act with it: in numpy (``compile`` and ``envs`` unused)."""
        return SquashedGaussianEngine(self)


class DeterministicEngine(ComputesHere):
    """``tanh(MLP(s))`` of a :class:`~hpcrl.models.continuous_policies.DeterministicPolicy`."""

    def __init__(self, policy: DeterministicPolicy) -> None:
        self.policy = policy
        self.sync()

    def sync(self) -> None:
        """Re-take views of the policy's layers."""
        self.layers = layer_views(self.policy.trunk, self.policy.head)

    def step(self, obs: np.ndarray, noise: np.ndarray | None = None,
             state: np.ndarray | None = None) -> Step:
        """The policy's actions ``[B, A]`` in ``[-1, 1]`` (exploration noise is added by the
        collector; ``noise`` and ``state`` unused)."""
        return Step(np.tanh(forward(self.layers, self.policy.obs_format.encode_numpy(obs))))


class SquashedGaussianEngine(ComputesHere):
    """Samples ``tanh(mean + std * noise)`` of a :class:`SquashedGaussianPolicy`."""

    def __init__(self, policy: SquashedGaussianPolicy) -> None:
        self.policy = policy
        self.sync()

    def sync(self) -> None:
        """Re-take views of the trunk's and both heads' layers."""
        p = self.policy
        self.trunk = layer_views(p.trunk)
        self.mean = layer_views(p.mean_head)
        self.log_std = layer_views(p.log_std_head)

    def step(self, obs: np.ndarray, noise: np.ndarray | None = None,
             state: np.ndarray | None = None) -> Step:
        """Actions ``tanh(mean + std x noise)`` ``[B, A]`` for standard normals ``noise``;
        ``tanh(mean)`` without noise (evaluation); ``state`` unused."""
        h = forward(self.trunk, self.policy.obs_format.encode_numpy(obs))
        mean = forward(self.mean, h)
        if noise is None:
            return Step(np.tanh(mean))
        log_std = np.clip(forward(self.log_std, h), LOG_STD_MIN, LOG_STD_MAX)
        return Step(np.tanh(mean + np.exp(log_std) * noise))
