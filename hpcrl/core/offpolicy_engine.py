"""numpy forward passes of the off-policy policies, for the collectors' step loop.

As in :mod:`hpcrl.core.inference`, torch's per-operation overhead dominates for the small
MLPs of classic control, so collectors evaluate the policy in numpy. The engines hold
*views* of the module's weights (no copy): loading new weights into the module in place
updates them; :meth:`sync` re-takes the views in case parameters were re-allocated.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from hpcrl.core.encoders import FormatEncoder
from hpcrl.core.mlp_kernel import forward, layer_views
from hpcrl.core.policies import (
    LOG_STD_MAX,
    LOG_STD_MIN,
    DeterministicPolicy,
    SquashedGaussianPolicy,
)
from hpcrl.core.qnetwork import QNetwork


class GreedyQEngine:
    """Argmax-Q actions of a :class:`QNetwork`."""

    def __init__(self, network: QNetwork) -> None:
        self.network = network
        self.sync()

    def sync(self) -> None:
        """Re-take views of the network's layers."""
        self.layers = layer_views(self.network.trunk, self.network.head)

    def q_values(self, obs: np.ndarray) -> np.ndarray:
        """``Q(s, .)`` of a batch of observations, ``[B, num_actions]``."""
        return forward(self.layers, self.network.obs_format.encode_numpy(obs))

    def act(self, obs: np.ndarray, noise: np.ndarray | None = None) -> np.ndarray:
        """The greedy actions ``[B]`` (``noise`` unused)."""
        return self.q_values(obs).argmax(axis=1)


class TorchGreedyQEngine(GreedyQEngine):
    """Argmax-Q actions of a :class:`QNetwork` with an image encoder, evaluated by torch
    (convolutions have no numpy form here; per-step dispatch is small next to them)."""

    def sync(self) -> None:
        """Note the network's device (torch evaluates the module itself: no views to take)."""
        self.device = self.network.head.weight.device

    def q_values(self, obs: np.ndarray) -> np.ndarray:
        """``Q(s, .)`` ``[B, num_actions]`` by the network on its device, as numpy."""
        with torch.inference_mode():
            return self.network.q_values(torch.from_numpy(obs).to(self.device)).cpu().numpy()


class DeterministicEngine:
    """``tanh(MLP(s))`` of a :class:`~hpcrl.core.policies.DeterministicPolicy`."""

    def __init__(self, policy: DeterministicPolicy) -> None:
        self.policy = policy
        self.sync()

    def sync(self) -> None:
        """Re-take views of the policy's layers."""
        self.layers = layer_views(self.policy.trunk, self.policy.head)

    def act(self, obs: np.ndarray, noise: np.ndarray | None = None) -> np.ndarray:
        """The policy's actions ``[B, A]`` in ``[-1, 1]`` (exploration noise is added by the
        collector; ``noise`` unused)."""
        return np.tanh(forward(self.layers, self.policy.obs_format.encode_numpy(obs)))


class SquashedGaussianEngine:
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

    def act(self, obs: np.ndarray, noise: np.ndarray | None = None) -> np.ndarray:
        """``tanh(mean + std x noise)`` ``[B, A]`` for standard normals ``noise``; ``tanh(mean)``
        without noise (evaluation)."""
        h = forward(self.trunk, self.policy.obs_format.encode_numpy(obs))
        mean = forward(self.mean, h)
        if noise is None:
            return np.tanh(mean)
        log_std = np.clip(forward(self.log_std, h), LOG_STD_MIN, LOG_STD_MAX)
        return np.tanh(mean + np.exp(log_std) * noise)


Engine = GreedyQEngine | DeterministicEngine | SquashedGaussianEngine


def make_policy_engine(policy: nn.Module) -> Engine:
    """The numpy engine of an off-policy policy module."""
    if isinstance(policy, QNetwork):
        if isinstance(policy.encoder, FormatEncoder):
            return GreedyQEngine(policy)
        return TorchGreedyQEngine(policy)
    if isinstance(policy, SquashedGaussianPolicy):
        return SquashedGaussianEngine(policy)
    if isinstance(policy, DeterministicPolicy):
        return DeterministicEngine(policy)
    raise TypeError(f"no numpy engine for an off-policy policy {type(policy).__name__}")
