"""Q-network of DQN: an MLP from encoded observations to one value per discrete action.

Called on raw observations it returns the greedy (argmax-Q) action, so a trained network is
usable outside hpcrl as it is (``hpcrl.load_policy``). Collectors act with it through the
engine it declares: :class:`GreedyQEngine` in numpy, :class:`TorchGreedyQEngine` behind an
image encoder.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from hpcrl.envs.obs_format import ObsFormat, ObsInput, box_format
from hpcrl.models.acting import ActedEnvs, ComputesHere, Step
from hpcrl.models.actor import mlp
from hpcrl.models.encoders import (
    FormatEncoder,
    features_of,
    make_encoder,
    orthogonal_init,
    reset_fixup,
)
from hpcrl.models.mlp_kernel import forward, layer_views
from hpcrl.numerics.precision import compute_dtype
from hpcrl.sections.schema import ActorConfig


def batch_obs(obs: torch.Tensor | np.ndarray, obs_shape: tuple[int, ...]
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
                 config: ActorConfig, obs_format: ObsFormat | None = None) -> None:
        super().__init__()
        hidden = list(config.hidden_sizes)
        self.obs_shape = obs_shape
        self.obs_format = obs_format or box_format(obs_shape)
        self.num_actions = num_actions
        self.encoder = make_encoder(config.encoder, self.obs_format, config.features,
                                    config.channels, compute_dtype(config.compute_dtype),
                                    config.encoder_init)
        features = features_of(self.encoder)
        self.trunk = mlp([features] + hidden, config.activation)
        self.head = nn.Linear(hidden[-1] if hidden else features, num_actions)
        if config.ortho_init:
            orthogonal_init(self.encoder, math.sqrt(2))
            orthogonal_init(self.trunk, math.sqrt(2))
            orthogonal_init(self.head, 1.0)
            reset_fixup(self.encoder)  # Fixup's residual blocks keep their own initial values

    def q_values(self, obs: torch.Tensor) -> torch.Tensor:
        """``[B, num_actions]`` values of carried observations ``[B, ...]`` (Box values, or
        integers that the observation format one-hot encodes)."""
        return self.head(self.trunk(self.encoder(obs)))

    @torch.no_grad()
    def forward(self, obs: ObsInput) -> torch.Tensor:
        """Greedy actions for raw observations: one, as the env returns it, or a batch."""
        x, single = self.obs_format.as_batch(obs)
        actions = self.q_values(x.to(self.head.weight.device)).argmax(dim=-1)
        return actions[0] if single else actions

    def acting_engine(self, compile: bool = False, envs: ActedEnvs | None = None
                      ) -> GreedyQEngine:
        """How collectors act with it: argmax-Q in numpy (:class:`GreedyQEngine`), by torch
        behind an image encoder (:class:`TorchGreedyQEngine`); ``compile`` and ``envs``
        unused."""
        if isinstance(self.encoder, FormatEncoder):
            return GreedyQEngine(self)
        return TorchGreedyQEngine(self)


class GreedyQEngine(ComputesHere):
    """Argmax-Q actions of a :class:`QNetwork`, and its Q-values
    (:class:`~hpcrl.models.acting.QValueEngine`)."""

    def __init__(self, network: QNetwork) -> None:
        self.network = network
        self.sync()

    def sync(self) -> None:
        """Re-take views of the network's layers."""
        self.layers = layer_views(self.network.trunk, self.network.head)

    def q_values(self, obs: np.ndarray) -> np.ndarray:
        """``Q(s, .)`` of a batch of observations, ``[B, num_actions]``."""
        return forward(self.layers, self.network.obs_format.encode_numpy(obs))

    def step(self, obs: np.ndarray, noise: np.ndarray | None = None,
             state: np.ndarray | None = None) -> Step:
        """The greedy actions ``[B]`` (``noise`` and ``state`` unused)."""
        return Step(self.q_values(obs).argmax(axis=1))


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
