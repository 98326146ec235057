"""Optimisers over one flat parameter vector: Adam and RMSprop.

They follow ``torch.optim.Adam`` and ``torch.optim.RMSprop`` (default options) step for step
(tests compare them), but work on the single contiguous vector that holds every parameter,
so a step is a few vector operations, and they keep their state as three plain entries.
"""
from __future__ import annotations

import math
from typing import Any, Protocol

import torch


class FlatOptimizer(Protocol):
    """An optimiser over one flat parameter vector, its state a plain dict for checkpoints."""
    def step(self, params: torch.Tensor, grads: torch.Tensor, lr: float) -> None:
        """Update ``params`` in place from ``grads`` with learning rate ``lr``."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """The optimiser's state (copies), tagged with its kind."""
        ...

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s values; another kind's state raises ValueError."""
        ...


class FlatAdam:
    """Adam (Kingma & Ba 2015) with bias correction, as in ``torch.optim.Adam``."""

    def __init__(self, numel: int, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, device: torch.device | str = "cpu") -> None:
        self.beta1, self.beta2 = betas
        self.eps = eps
        self.steps = 0
        self.exp_avg = torch.zeros(numel, device=device)
        self.exp_avg_sq = torch.zeros(numel, device=device)
        self._denom = torch.empty(numel, device=device)  # reused: no allocation per step

    def step(self, params: torch.Tensor, grads: torch.Tensor, lr: float) -> None:
        """One Adam step on ``params`` in place, bias-corrected for the step count."""
        self.steps += 1
        self.exp_avg.lerp_(grads, 1 - self.beta1)
        self.exp_avg_sq.mul_(self.beta2).addcmul_(grads, grads, value=1 - self.beta2)
        correction1 = 1 - self.beta1 ** self.steps
        correction2_sqrt = math.sqrt(1 - self.beta2 ** self.steps)
        denom = torch.sqrt(self.exp_avg_sq, out=self._denom).div_(correction2_sqrt)
        params.addcdiv_(self.exp_avg, denom.add_(self.eps), value=-lr / correction1)

    def state_dict(self) -> dict[str, Any]:
        """The step count and both moment vectors (copies), tagged ``adam``."""
        return {"kind": "adam", "steps": self.steps, "exp_avg": self.exp_avg.clone(),
                "exp_avg_sq": self.exp_avg_sq.clone()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s values in place; another optimiser's state raises
        ValueError (``algo.optimizer`` changed)."""
        _check_kind(state, "adam")
        self.steps = int(state["steps"])
        self.exp_avg.copy_(state["exp_avg"])
        self.exp_avg_sq.copy_(state["exp_avg_sq"])


class FlatRMSprop:
    """RMSprop without momentum or centring, as in ``torch.optim.RMSprop``."""

    def __init__(self, numel: int, alpha: float = 0.99, eps: float = 1e-8,
                 device: torch.device | str = "cpu") -> None:
        self.alpha, self.eps = alpha, eps
        self.square_avg = torch.zeros(numel, device=device)
        self._denom = torch.empty(numel, device=device)  # reused: no allocation per step

    def step(self, params: torch.Tensor, grads: torch.Tensor, lr: float) -> None:
        """One RMSprop step on ``params`` in place."""
        self.square_avg.mul_(self.alpha).addcmul_(grads, grads, value=1 - self.alpha)
        denom = torch.sqrt(self.square_avg, out=self._denom).add_(self.eps)
        params.addcdiv_(grads, denom, value=-lr)

    def state_dict(self) -> dict[str, Any]:
        """The running mean of squared gradients (a copy), tagged ``rmsprop``."""
        return {"kind": "rmsprop", "square_avg": self.square_avg.clone()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s values in place; another optimiser's state raises
        ValueError (``algo.optimizer`` changed)."""
        _check_kind(state, "rmsprop")
        self.square_avg.copy_(state["square_avg"])


def _check_kind(state: dict[str, Any], kind: str) -> None:
    if state.get("kind") != kind:
        raise ValueError(f"optimiser state is for {state.get('kind')!r}, not {kind!r}: "
                         f"algo.optimizer changed since the checkpoint")


def make_flat_optimizer(kind: str, numel: int, eps: float,
                        device: torch.device | str = "cpu", fused: bool = False) -> FlatOptimizer:
    """``fused`` picks :class:`FusedFlatAdam` for Adam (the off-policy learners use it)."""
    if kind == "rmsprop":
        return FlatRMSprop(numel, eps=eps, device=device)
    if fused:
        return FusedFlatAdam(numel, eps=eps, device=device)
    return FlatAdam(numel, eps=eps, device=device)


class FusedFlatAdam(FlatAdam):
    """:class:`FlatAdam` stepped by torch's fused Adam kernel: one pass over memory instead
    of seven, same arithmetic (tests compare it with :class:`FlatAdam`) and same state.

    It falls back to :class:`FlatAdam`'s vector operations where the kernel is missing
    (older torch, or no CPU implementation).
    """

    def __init__(self, numel: int, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, device: torch.device | str = "cpu") -> None:
        super().__init__(numel, betas, eps, device)
        self._step_tensor = torch.zeros((), device=device)
        self._kernel = getattr(torch, "_fused_adam_", None)

    def step(self, params: torch.Tensor, grads: torch.Tensor, lr: float) -> None:
        """One Adam step by the fused kernel; where the kernel is missing or refuses the tensors,
        by :class:`FlatAdam`'s operations from then on."""
        if self._kernel is None:
            super().step(params, grads, lr)
            return
        self._step_tensor.fill_(self.steps + 1)
        try:
            self._kernel([params], [grads], [self.exp_avg], [self.exp_avg_sq], [],
                         [self._step_tensor], lr=lr, beta1=self.beta1, beta2=self.beta2,
                         weight_decay=0.0, eps=self.eps, amsgrad=False, maximize=False)
        except (RuntimeError, NotImplementedError):
            self._kernel = None
            super().step(params, grads, lr)
            return
        self.steps += 1
