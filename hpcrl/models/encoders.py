"""Encoders: the first stage of every network, from carried observations to a feature vector.

``actor.encoder`` picks one:

- ``mlp``: the observation's features (:meth:`ObsFormat.encode`: Box values flattened,
  integer parts one-hot) as they are; the MLP layers of ``actor.hidden_sizes`` follow.
- ``nature_cnn``: the convolutional torso of Mnih et al. (2015, "Human-level control through
  deep reinforcement learning"): 32 8x8 filters with stride 4, 64 4x4 stride 2, 64 3x3
  stride 1, then a linear layer to ``actor.features`` units, ReLU throughout.
- ``impala_resnet``: the deep torso of Espeholt et al. (2018, IMPALA): three stacks of
  16, 32 and 32 channels, each a 3x3 convolution, a 3x3 max-pool with stride 2 and two
  residual blocks of two 3x3 convolutions, then ReLU and a linear layer to
  ``actor.features`` units.

A ``Dict`` observation gets one encoder per key, their features concatenated in the space's
key order (as Stable-Baselines3's ``MultiInputPolicy`` does): a key of 3 dimensions goes
through ``actor.encoder`` when that is an image encoder, every other key (and every key
under ``mlp``) through its values as they are (uint8 images scaled to [0, 1]), integer parts
one-hot.

Image encoders take an observation of shape ``[C, H, W]`` or ``[H, W, C]`` (found from the
space, or set by ``actor.channels``), so frame stacks, RGB frames and MinAtar's boolean
channels all fit. Integer pixels (uint8 frames, bool channels) are scaled to [0, 1] inside
the network, on the learner's device: rollouts and replays keep the env's dtype and a
saved policy takes raw frames.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar, Literal

import numpy as np
import torch
from torch import nn

from hpcrl.envs.obs_format import ObsFormat
from hpcrl.errors import ConfigError, ExplainedError
from hpcrl.numerics.precision import DTYPE_NAMES, autocast

Channels = Literal["auto", "first", "last"]


def channels_last(shape: tuple[int, ...], channels: str = "auto") -> bool:
    """Whether an image observation of ``shape`` is ``[H, W, C]``.

    ``auto``: channels-last when the last dimension is no larger than the first (an RGB
    frame ``96x96x3``, MinAtar's ``10x10xC``), channels-first otherwise (a frame stack
    ``4x84x84``).
    """
    if channels == "first":
        return False
    if channels == "last":
        return True
    return shape[-1] <= shape[0]


class ImageInput(nn.Module):
    """Carried image observations as ``[B, C, H, W]`` in [0, 1] for integer pixels."""

    def __init__(self, fmt: ObsFormat, channels: str = "auto") -> None:
        super().__init__()
        if not fmt.image:
            raise ValueError(f"an image encoder needs observations of 3 dimensions ([C, H, W] or "
                             f"[H, W, C]), got shape {fmt.shape}; use actor.encoder=mlp")
        self.last = channels_last(fmt.shape, channels)
        self.scale = 1.0 / 255.0 if fmt.dtype == "uint8" else 1.0
        c, h, w = ((fmt.shape[2], fmt.shape[0], fmt.shape[1]) if self.last else fmt.shape)
        self.chw = (int(c), int(h), int(w))

    def forward(self, obs: torch.Tensor, reorder: bool = False,
                dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The batch in ``dtype``; ``reorder``: in oneDNN's channels-last memory layout (done
        while still integers, 4x fewer bytes, and kept by the conversion)."""
        x = obs.permute(0, 3, 1, 2) if self.last else obs
        if reorder:
            x = x.contiguous(memory_format=torch.channels_last)
        y = x.to(dtype)
        if self.scale == 1.0:
            return y
        return y.mul_(self.scale) if y is not x else y * self.scale  # never the caller's tensor


class ImageTooSmall(ExplainedError, ValueError):
    """An image encoder whose strided convolutions leave nothing of the env's frames."""


def _conv_out(module: nn.Module, chw: tuple[int, int, int], name: str) -> int:
    """Width of the flattened output of ``module`` on a ``chw`` image."""
    try:
        with torch.no_grad():
            return int(np.prod(module(torch.zeros((1,) + chw)).shape[1:]))
    except RuntimeError:
        raise ImageTooSmall(f"observations of {chw[1]}x{chw[2]} pixels are too small for "
                         f"actor.encoder={name} (its strided convolutions need at least 36x36); "
                         f"use actor.encoder=impala_resnet") from None


class _ConvTorso(nn.Module, ABC):
    """Image input, a convolution stack ending flat, and a linear layer to ``features``
    ReLU units: what every image encoder shares. With a ``compute_dtype`` (bfloat16) the
    stack and the linear layer run under autocast and the features come out float32.

    Every image encoder is built as ``Class(fmt, features, channels, compute_dtype, init)``
    and registered in :data:`IMAGE_ENCODERS` under its ``name``: a subclass gives its
    convolution stack in :meth:`conv_stack` and lists in ``inits`` the
    ``actor.encoder_init`` values it implements (:func:`make_encoder` refuses the others)."""

    name: ClassVar[str]
    inits: ClassVar[tuple[str, ...]] = ("default",)

    def __init__(self, fmt: ObsFormat, features: int, channels: str = "auto",
                 compute_dtype: torch.dtype | None = None, init: str = "default") -> None:
        super().__init__()
        self.input = ImageInput(fmt, channels)
        self.convs = self.conv_stack(self.input.chw[0], init)
        self.out = nn.Sequential(
            nn.Linear(_conv_out(self.convs, self.input.chw, self.name), features), nn.ReLU())
        self.features = features
        self.compute_dtype = compute_dtype  # not state: a checkpoint loads either way

    @abstractmethod
    def conv_stack(self, channels: int, init: str) -> nn.Sequential:
        """The convolutions from ``channels`` input planes to a flat output, initialised as
        ``init`` says (one of ``inits``)."""

    def _channels_last(self, training: bool) -> bool:
        """Whether the CPU runs this stack faster on channels-last batches (oneDNN's own
        layout) when ``training`` (a learner's batch, with gradients) or acting."""
        return True

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        reorder = obs.device.type == "cpu" and self._channels_last(torch.is_grad_enabled())
        with autocast(obs.device, self.compute_dtype):
            x = self.input(obs, reorder, self.compute_dtype or torch.float32)
            features = self.out(self.convs(x))
        return features.float()


class NatureCNN(_ConvTorso):
    """Mnih et al. (2015)'s torso, ending in ``features`` ReLU units."""

    name = "nature_cnn"

    def conv_stack(self, channels: int, init: str) -> nn.Sequential:
        """Three strided convolutions (8x8/4, 4x4/2, 3x3/1), flattened."""
        return nn.Sequential(
            nn.Conv2d(channels, 32, 8, stride=4), nn.ReLU(),
            nn.Conv2d(32, 64, 4, stride=2), nn.ReLU(),
            nn.Conv2d(64, 64, 3, stride=1), nn.ReLU(), nn.Flatten())

    def _channels_last(self, training: bool) -> bool:
        # one core, 84x84x4 frames: float32 forward+backward of 256 frames 186 ms
        # channels-last, 244 ms not; acting on 8 frames 2.8 against 2.4 ms; bfloat16 105
        # against 98 ms and 2.3 against 1.8 ms: only a float32 learner's batch gains
        return training and self.compute_dtype is None


class _Residual(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv0 = nn.Conv2d(channels, channels, 3, padding=1)
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv1(torch.relu(self.conv0(torch.relu(x))))


class FixupResidual(nn.Module):
    """A residual block with Fixup initialisation (Zhang et al. 2019, "Fixup Initialization:
    Residual Learning Without Normalization"), as the seed's IMPALA ResNet has it: scalar
    biases before each convolution and activation, a scalar multiplier on the branch, the
    convolutions without biases; the first convolution He-initialised and scaled by
    ``blocks ** -0.5`` (two layers a branch), the second zero, so that every block starts as
    the identity and the deep torso trains without normalisation layers."""

    def __init__(self, channels: int, blocks: int) -> None:
        super().__init__()
        self.blocks = blocks
        self.conv0 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bias = nn.Parameter(torch.zeros(4))
        self.scale = nn.Parameter(torch.ones(1))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Fixup's initial values (also after the actor's orthogonal initialisation)."""
        fan_in = self.conv0.in_channels * 9
        with torch.no_grad():
            self.conv0.weight.normal_(0.0, (2.0 / fan_in) ** 0.5 * self.blocks ** -0.5)
            self.conv1.weight.zero_()
            self.bias.zero_()
            self.scale.fill_(1.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x + scale x conv1(relu(conv0(relu(x) + b0) + b1) + b2) + b3``."""
        b = self.bias.to(x.dtype)
        out = self.conv0(torch.relu(x) + b[0])
        out = self.conv1(torch.relu(out + b[1]) + b[2])
        return x + out * self.scale.to(x.dtype) + b[3]


def orthogonal_init(module: nn.Module, gain: float) -> None:
    """Orthogonal weights with ``gain`` and zero biases for every Linear and Conv2d of
    ``module`` (the one initialiser of actors, Q-networks and policies)."""
    for layer in module.modules():
        if isinstance(layer, (nn.Linear, nn.Conv2d)):
            nn.init.orthogonal_(layer.weight, gain)
            if layer.bias is not None:  # (Fixup's convolutions have none)
                nn.init.zeros_(layer.bias)


def reset_fixup(module: nn.Module) -> None:
    """Give every :class:`FixupResidual` in ``module`` its Fixup values again (an initialiser
    that swept over all convolutions, such as the actor's orthogonal one, changed them)."""
    for block in module.modules():
        if isinstance(block, FixupResidual):
            block.reset_parameters()


ENCODER_INITS = ("default", "fixup")


class ImpalaResNet(_ConvTorso):
    """Espeholt et al. (2018)'s 16-32-32 residual torso, ending in ``features`` ReLU units;
    ``init="fixup"`` makes its residual blocks :class:`FixupResidual` ones."""

    name = "impala_resnet"
    inits = ENCODER_INITS
    depths = (16, 32, 32)

    def conv_stack(self, channels: int, init: str) -> nn.Sequential:
        """Per depth: a 3x3 convolution, a 3x3/2 max-pool and two residual blocks; flattened
        after a ReLU."""
        layers: list[nn.Module] = []
        blocks = 2 * len(self.depths)

        def residual(depth: int) -> nn.Module:
            return FixupResidual(depth, blocks) if init == "fixup" else _Residual(depth)

        for depth in self.depths:
            layers += [nn.Conv2d(channels, depth, 3, padding=1),
                       nn.MaxPool2d(3, stride=2, padding=1), residual(depth), residual(depth)]
            channels = depth
        layers += [nn.ReLU(), nn.Flatten()]
        return nn.Sequential(*layers)

    def _channels_last(self, training: bool) -> bool:
        # one core, 84x84x4 frames: forward+backward of 256 frames 1.41 s channels-last
        # against 2.40 s (bfloat16 0.80 against 1.25 s), acting on 8 frames 14 against
        # 26 ms (bfloat16 11 against 25 ms): channels-last always
        return True


#: The image encoders ``actor.encoder`` names, each a :class:`_ConvTorso`; with ``mlp``
#: (:class:`FormatEncoder`, no parameters) they are :data:`ENCODERS`.
IMAGE_ENCODERS: dict[str, type[_ConvTorso]] = {
    cls.name: cls for cls in (NatureCNN, ImpalaResNet)}
ENCODERS: tuple[str, ...] = ("mlp", *IMAGE_ENCODERS)


class FormatEncoder(nn.Module):
    """The ``mlp`` encoder: :meth:`ObsFormat.encode` (no parameters)."""

    def __init__(self, fmt: ObsFormat) -> None:
        super().__init__()
        self.fmt = fmt
        self.features = fmt.features

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """The carried observations ``[B, ...]`` as features ``[B, features]``."""
        return self.fmt.encode(obs)


class DictEncoder(nn.Module):
    """One encoder per key of a ``Dict`` observation, features concatenated in key order."""

    def __init__(self, fmt: ObsFormat, name: str, features: int, channels: str,
                 compute_dtype: torch.dtype | None = None, init: str = "default") -> None:
        super().__init__()
        self.fmt = fmt
        self.encoders = nn.ModuleList(
            make_encoder(name if sub.image else "mlp", sub, features, channels,
                         compute_dtype if sub.image else None, init if sub.image else "default")
            for _, sub, _ in fmt.keys)
        self.features = sum(features_of(e) for e in self.encoders)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Each key's features from its own encoder, concatenated ``[B, features]``."""
        keys = self.fmt.unpack(obs)
        return torch.cat([encoder(keys[name]) for encoder, (name, _, _)
                          in zip(self.encoders, self.fmt.keys, strict=True)], dim=1)


def features_of(encoder: nn.Module) -> int:
    """The width of ``encoder``'s output: its int ``features`` attribute. Every encoder has
    one (hpcrl's set it; :func:`hpcrl.components.contracts.make_network` refuses a network without
    it), but torch types a module's attributes as ``Tensor | Module``, so callers read it
    through here to get the int it is."""
    features = encoder.features
    assert isinstance(features, int), f"{type(encoder).__name__}.features is not an int"
    return features


def make_encoder(name: str, fmt: ObsFormat, features: int, channels: str = "auto",
                 compute_dtype: torch.dtype | None = None, init: str = "default"
                 ) -> nn.Module:
    """The encoder ``name`` for observations of ``fmt``; ``.features`` is its output width.
    ``compute_dtype`` (``actor.compute_dtype``, None for float32) is the format its image
    torsos compute in; an encoder with none refuses one rather than ignore it. ``init``
    (``actor.encoder_init``): ``fixup`` gives the IMPALA ResNet Fixup residual blocks."""
    if name not in ENCODERS or init not in ENCODER_INITS:
        raise ValueError(f"unknown encoder {name!r} or init {init!r}; use one of {ENCODERS} "
                         f"and of {ENCODER_INITS}")
    torso = IMAGE_ENCODERS.get(name)
    if init not in (torso.inits if torso is not None else ("default",)):
        having = [n for n, cls in IMAGE_ENCODERS.items() if init in cls.inits]
        raise ConfigError(f"config key 'actor.encoder_init' ({init}) is an initialisation of "
                          f"actor.encoder={' or '.join(having)} only, and {name} has none "
                          f"such; set actor.encoder={having[0]} or actor.encoder_init=default")
    images = fmt.image or any(sub.image for _, sub, _ in fmt.keys)
    if name != "mlp" and not images:
        raise ConfigError(f"config key 'actor.encoder' ({name}) takes image observations "
                          f"([C, H, W] or [H, W, C], or a Dict with such a key), and these "
                          f"have shape {fmt.shape}; use actor.encoder=mlp")
    if compute_dtype is not None and name == "mlp":
        raise ConfigError(f"config key 'actor.compute_dtype' ({DTYPE_NAMES[compute_dtype]}) "
                          f"applies to image encoders, and these observations (shape "
                          f"{fmt.shape}) go through none with actor.encoder=mlp; set "
                          f"actor.compute_dtype=float32")
    if torso is None:
        return FormatEncoder(fmt)
    if fmt.packed:
        return DictEncoder(fmt, name, features, channels, compute_dtype, init)
    return torso(fmt, features, channels, compute_dtype, init)
