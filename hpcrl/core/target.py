"""Target networks: a frozen copy of a network, moved towards it by Polyak averaging.

The copy's parameters live in one flat tensor, so ``target += tau * (online - target)`` over
a whole network is one vector operation on the online network's flat segment.
"""
from __future__ import annotations

import copy

import torch
from torch import nn

from hpcrl.core.flat import contiguous_parameters


class TargetNetwork:
    """A copy of ``online`` (made now, equal to it) that only :meth:`update` changes."""

    def __init__(self, online: nn.Module) -> None:
        self.module = copy.deepcopy(online)
        self.module.requires_grad_(False)
        self.flat = contiguous_parameters(self.module)

    def to(self, device: torch.device) -> TargetNetwork:
        """Move the copy to ``device`` (its flat tensor with it)."""
        self.module.to(device)
        self.flat = contiguous_parameters(self.module)
        return self

    def update(self, online_flat: torch.Tensor, tau: float) -> None:
        """Polyak step towards ``online_flat`` (the online parameters, flat, same order);
        ``tau = 1`` copies them."""
        with torch.no_grad():
            if tau >= 1.0:
                self.flat.copy_(online_flat)
            else:
                self.flat.lerp_(online_flat, tau)
