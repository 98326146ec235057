"""Random Network Distillation (Burda et al. 2018, "Exploration by Random Network Distillation").

A fixed, randomly initialised *target* network embeds an observation; a *predictor* is
trained to reproduce the embedding. Observations like those seen often are predicted well,
new ones are not, so the predictor's squared error on the observation a step led to is that
step's intrinsic reward. Both networks see observations normalised by their own running
statistics (:attr:`RandomNetworkDistillation.obs_rms`, clipped to ``rnd.clip_obs``), and the
rewards are divided by a running std of intrinsic returns (:attr:`ret_rms`).

The module is part of the actor (``actor.rnd``): the predictor's parameters sit in the
actor's flat parameters, so its gradients travel with the policy's on every scheme, and the
statistics are buffers, published with the weights and saved in checkpoints. The target's
parameters never receive a gradient (every optimiser leaves a parameter with zero gradients
where it is), and a test checks that training leaves them as they were.
"""
from __future__ import annotations

import torch
from torch import nn

from hpcrl.envs.obs_format import ObsFormat
from hpcrl.models.encoders import ImageInput
from hpcrl.numerics.normalization import Moments, RunningMoments
from hpcrl.sections.rnd_section import RndConfig


def _mlp(sizes: list[int]) -> nn.Sequential:
    """Linear layers of ``sizes`` with ReLU between them (none after the last)."""
    layers: list[nn.Module] = []
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        layers.append(nn.Linear(n_in, n_out))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


SMALL_IMAGE = 36  # pixels a side below which Burda et al.'s strided convolutions leave nothing


def _convs(chw: tuple[int, int, int]) -> nn.Sequential:
    """Burda et al.'s convolutions (leaky ReLU), ending flat; for frames smaller than
    :data:`SMALL_IMAGE` a side (MinAtar's 10x10) two unstrided 3x3 ones (32, 64 channels)."""
    channels = chw[0]
    if min(chw[1:]) < SMALL_IMAGE:
        return nn.Sequential(nn.Conv2d(channels, 32, 3, padding=1), nn.LeakyReLU(),
                             nn.Conv2d(32, 64, 3, padding=1), nn.LeakyReLU(), nn.Flatten())
    return nn.Sequential(nn.Conv2d(channels, 32, 8, stride=4), nn.LeakyReLU(),
                         nn.Conv2d(32, 64, 4, stride=2), nn.LeakyReLU(),
                         nn.Conv2d(64, 64, 3, stride=1), nn.LeakyReLU(), nn.Flatten())


def _init(module: nn.Module) -> None:
    for layer in module.modules():
        if isinstance(layer, (nn.Linear, nn.Conv2d)):
            nn.init.orthogonal_(layer.weight, 2 ** 0.5)
            if layer.bias is not None:  # every layer here has one
                nn.init.zeros_(layer.bias)


class RandomNetworkDistillation(nn.Module):
    """Target, predictor and the running statistics of their inputs and of the returns.

    Vector observations (and Dict observations) enter as :meth:`ObsFormat.encode`'s
    features; image observations as ``[C, H, W]`` pixels (uint8 scaled to [0, 1]) through
    convolutions. :meth:`inputs` gives what the statistics are kept over.
    """

    def __init__(self, fmt: ObsFormat, config: RndConfig) -> None:
        super().__init__()
        self.config = config
        self.fmt = fmt
        self.image: ImageInput | None = ImageInput(fmt) if fmt.image and not fmt.packed \
            else None
        out = config.features
        if self.image is not None:
            chw = self.image.chw
            shape: tuple[int, ...] = chw
            with torch.no_grad():
                flat = int(_convs(chw)(torch.zeros((1,) + chw)).shape[1])
            self.target = nn.Sequential(_convs(chw), nn.Linear(flat, out))
            self.predictor = nn.Sequential(_convs(chw), nn.Linear(flat, 512), nn.ReLU(),
                                           nn.Linear(512, 512), nn.ReLU(),
                                           nn.Linear(512, out))
        else:
            shape = (fmt.features,)
            hidden = [int(h) for h in config.hidden_sizes]
            self.target = _mlp([fmt.features] + hidden + [out])
            self.predictor = _mlp([fmt.features] + hidden + hidden[-1:] + [out])
        _init(self.target)
        _init(self.predictor)
        self.target.requires_grad_(False)
        self.input_shape = shape
        self.obs_rms = RunningMoments(shape)
        self.ret_rms = RunningMoments(())

    def inputs(self, obs: torch.Tensor) -> torch.Tensor:
        """Carried observations ``[B, ...]`` as the networks' float inputs, not yet
        normalised: pixels ``[B, C, H, W]``, or features ``[B, F]``."""
        if self.image is not None:
            return self.image(obs)
        return self.fmt.encode(obs)

    def normalized(self, inputs: torch.Tensor, mean: torch.Tensor, std: torch.Tensor
                   ) -> torch.Tensor:
        """``clip((inputs - mean) / std)`` with statistics given (an update's, see
        :func:`hpcrl.buffers.intrinsic.IntrinsicTargets`)."""
        clip = self.config.clip_obs
        return ((inputs - mean.to(inputs)) / std.to(inputs)).clamp(-clip, clip)

    def errors(self, normalized: torch.Tensor) -> torch.Tensor:
        """Squared prediction errors per sample ``[B]``, averaged over the embedding: the
        raw intrinsic reward, and (with gradients) the predictor's loss per sample."""
        with torch.no_grad():
            target = self.target(normalized)
        return (self.predictor(normalized) - target).pow(2).mean(dim=-1)


def moments_of(x: torch.Tensor) -> tuple[float, torch.Tensor, torch.Tensor]:
    """``(count, sum, sum of squares)`` over the first dimension, in float64."""
    x = x.double()
    return float(x.shape[0]), x.sum(dim=0), (x * x).sum(dim=0)


def merged_stats(stats: RunningMoments, moments: Moments) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and std of ``stats`` with ``moments`` folded in, leaving ``stats`` as it is."""
    copy = RunningMoments(tuple(stats.mean.shape))
    copy.load_state_dict(stats.state_dict())
    copy.merge(moments)
    return copy.mean, copy.std()
