"""An ensemble of probabilistic networks: each member maps its inputs to a diagonal Gaussian.

All members are evaluated at once: their weights are stacked on a leading ensemble axis, so a
batch ``[E, N, inputs]`` passes through every layer as one batched matrix product
(``torch.baddbmm``), whatever the number of members. Each member's head gives a mean and a
log-variance per output; the log-variance is held softly inside learnable bounds
``[min_logvar, max_logvar]`` (Chua et al. 2018, PETS), so a member cannot shrink its variance
without limit where the data are few, and :meth:`GaussianEnsemble.nll` adds the small
penalty that keeps the bounds themselves tight.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

ACTIVATIONS = {"tanh": torch.tanh, "relu": torch.relu, "elu": F.elu}
MAX_LOGVAR_INIT, MIN_LOGVAR_INIT = 0.5, -10.0  # PETS's initial bounds
BOUNDS_PENALTY = 0.01  # PETS's weight of (sum max_logvar - sum min_logvar) in the loss


class EnsembleLinear(nn.Module):
    """``E`` independent linear layers ``[in] -> [out]``, applied to ``[E, N, in]``.

    Weights start from a truncated normal of std ``1 / (2 sqrt(in))`` (PETS's), biases at 0.
    """

    def __init__(self, members: int, n_in: int, n_out: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(members, n_in, n_out))
        self.bias = nn.Parameter(torch.zeros(members, 1, n_out))
        std = 1.0 / (2.0 * math.sqrt(n_in))
        nn.init.trunc_normal_(self.weight, std=std, a=-2 * std, b=2 * std)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x @ W_e + b_e`` for every member ``e``: ``[E, N, in] -> [E, N, out]``."""
        return torch.baddbmm(self.bias, x, self.weight)


class GaussianEnsemble(nn.Module):
    """``members`` MLPs ``n_in -> hidden... -> (mean, logvar)`` of ``n_out`` values each."""

    def __init__(self, members: int, n_in: int, n_out: int, hidden: list[int],
                 activation: str) -> None:
        super().__init__()
        self.members, self.n_out = members, n_out
        self.activation = ACTIVATIONS[activation]
        sizes = [n_in, *hidden]
        self.layers = nn.ModuleList(EnsembleLinear(members, a, b)
                                    for a, b in zip(sizes[:-1], sizes[1:], strict=True))
        self.head = EnsembleLinear(members, sizes[-1], 2 * n_out)
        self.max_logvar = nn.Parameter(torch.full((n_out,), MAX_LOGVAR_INIT))
        self.min_logvar = nn.Parameter(torch.full((n_out,), MIN_LOGVAR_INIT))

    def _head(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = self.activation(layer(x))
        return self.head(x)

    def mean(self, x: torch.Tensor) -> torch.Tensor:
        """Each member's mean ``[E, N, n_out]`` for inputs ``[E, N, n_in]`` (what planning
        propagates; the variance is not computed)."""
        return self._head(x)[..., :self.n_out]

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Each member's mean and bounded log-variance, ``[E, N, n_out]`` each."""
        out = self._head(x)
        mean, raw = out[..., :self.n_out], out[..., self.n_out:]
        logvar = self.max_logvar - F.softplus(self.max_logvar - raw)
        return mean, self.min_logvar + F.softplus(logvar - self.min_logvar)

    def nll(self, x: torch.Tensor, target: torch.Tensor
            ) -> tuple[torch.Tensor, torch.Tensor]:
        """The Gaussian negative log-likelihood of ``target`` ``[E, N, n_out]`` (without its
        constant), averaged over rows and outputs and summed over members, plus the bounds'
        penalty; and each member's squared error of the mean ``[E, N, n_out]`` (detached)."""
        mean, logvar = self(x)
        error = mean - target
        nll = (error * error * torch.exp(-logvar) + logvar).mean(dim=(1, 2)).sum()
        penalty = BOUNDS_PENALTY * (self.max_logvar.sum() - self.min_logvar.sum())
        return nll + penalty, (error * error).detach()

    def weights_l2(self) -> torch.Tensor:
        """The sum of squares of every layer's weights (not biases or bounds)."""
        layers = [*self.layers, self.head]
        return sum((layer.weight * layer.weight).sum() for layer in layers)  # type: ignore[return-value]
