"""Target networks: a frozen copy of a network, moved towards it by Polyak averaging.

The copy's parameters live in one flat tensor, so ``target += tau * (online - target)`` over
a whole network is one vector operation on the online network's flat segment.
"""
from __future__ import annotations

import copy
from typing import Generic, TypeVar

import torch
from torch import nn

from hpcrl.numerics.flat import contiguous_parameters

# the online module's class; covariant so a TargetNetwork[QNetwork] is a
# TargetNetwork[nn.Module] (an algorithm's targets dict holds every kind)
ModuleT = TypeVar("ModuleT", bound=nn.Module, covariant=True)


class TargetNetwork(Generic[ModuleT]):
    """A copy of ``online`` (made now, equal to it) that only :meth:`update` changes;
    generic in the module's class, so that the copy keeps the online module's methods."""

    def __init__(self, online: ModuleT) -> None:
        self.module: ModuleT = copy.deepcopy(online)
        self.module.requires_grad_(False)
        self.flat = contiguous_parameters(self.module)

    def to(self, device: torch.device) -> TargetNetwork[ModuleT]:
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
