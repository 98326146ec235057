"""A module's parameters, buffers and gradients as single flat tensors.

Weights and gradients cross process boundaries as one contiguous buffer each: one message,
one all-reduce, no per-tensor overhead.
"""
from __future__ import annotations

import torch
from torch import nn


def _params(module: nn.Module) -> list[torch.Tensor]:
    return list(module.parameters())


def _buffers(module: nn.Module) -> list[torch.Tensor]:
    return [b for b in module.buffers() if b.is_floating_point()]


def num_params(module: nn.Module) -> int:
    return sum(p.numel() for p in _params(module))


def num_buffer_values(module: nn.Module) -> int:
    return sum(b.numel() for b in _buffers(module))


def _write(tensors: list[torch.Tensor], out: torch.Tensor) -> torch.Tensor:
    offset = 0
    for t in tensors:
        n = t.numel()
        out[offset:offset + n].copy_(t.detach().reshape(-1))
        offset += n
    return out


def _read(tensors: list[torch.Tensor], flat: torch.Tensor) -> None:
    offset = 0
    with torch.no_grad():
        for t in tensors:
            n = t.numel()
            t.copy_(flat[offset:offset + n].view_as(t))
            offset += n
    if offset != flat.numel():
        raise ValueError(f"flat tensor has {flat.numel()} values, the module needs {offset}")


def params_to_flat(module: nn.Module, out: torch.Tensor | None = None) -> torch.Tensor:
    """All parameters as one float32 vector (written into ``out`` when given)."""
    if out is None:
        out = torch.empty(num_params(module), dtype=torch.float32)
    return _write(_params(module), out)


def flat_to_params(module: nn.Module, flat: torch.Tensor) -> None:
    _read(_params(module), flat)


def buffers_to_flat(module: nn.Module, out: torch.Tensor | None = None) -> torch.Tensor:
    """All floating-point buffers (e.g. normaliser statistics) as one float64 vector."""
    if out is None:
        out = torch.empty(num_buffer_values(module), dtype=torch.float64)
    return _write(_buffers(module), out)


def flat_to_buffers(module: nn.Module, flat: torch.Tensor) -> None:
    _read(_buffers(module), flat)


def grads_to_flat(module: nn.Module, out: torch.Tensor | None = None) -> torch.Tensor:
    """All parameter gradients as one float32 vector (zeros where a gradient is None)."""
    params = _params(module)
    if out is None:
        out = torch.empty(num_params(module), dtype=torch.float32)
    offset = 0
    for p in params:
        n = p.numel()
        if p.grad is None:
            out[offset:offset + n].zero_()
        else:
            out[offset:offset + n].copy_(p.grad.reshape(-1))
        offset += n
    return out


def flat_to_grads(module: nn.Module, flat: torch.Tensor) -> None:
    """Set each parameter's ``.grad`` to its slice of ``flat`` (as a copy)."""
    offset = 0
    for p in _params(module):
        n = p.numel()
        p.grad = flat[offset:offset + n].view_as(p).clone()
        offset += n
