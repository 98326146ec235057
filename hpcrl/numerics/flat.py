"""A module's parameters, buffers and gradients as single flat tensors.

Weights and gradients cross process boundaries as one contiguous buffer each: one message,
one all-reduce, no per-tensor overhead.
"""
from __future__ import annotations

import torch
from torch import nn


def _params(module: nn.Module) -> list[torch.Tensor]:
    cached = module.__dict__.get("_hpcrl_params")
    if cached is None:  # parameter objects never change, only their storage
        params: list[torch.Tensor] = list(module.parameters())
        cached = module.__dict__["_hpcrl_params"] = params
    return cached


def _buffers(module: nn.Module) -> list[torch.Tensor]:
    return [b for b in module.buffers() if b.is_floating_point()]


def _flat_of(module: nn.Module) -> torch.Tensor | None:
    flat = module.__dict__.get("_hpcrl_flat_params")
    return flat if flat is not None and _aliases(_params(module), flat) else None


def has_flat_parameters(module: nn.Module) -> bool:
    """Whether every parameter of ``module`` already is, in order, a view of one flat tensor
    (so :func:`contiguous_parameters` would move nothing)."""
    return _flat_of(module) is not None


def num_params(module: nn.Module) -> int:
    """The number of parameter values of ``module``."""
    return sum(p.numel() for p in _params(module))


def num_buffer_values(module: nn.Module) -> int:
    """The number of values in ``module``'s floating-point buffers."""
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
    contiguous = _flat_of(module)
    if contiguous is not None:
        return out.copy_(contiguous.detach())
    return _write(_params(module), out)


def flat_to_params(module: nn.Module, flat: torch.Tensor) -> None:
    """Copy the flat vector ``flat`` into ``module``'s parameters, in :func:`params_to_flat`'s
    order (one copy when they share a contiguous buffer); a size mismatch raises ValueError."""
    contiguous = _flat_of(module)
    if contiguous is not None:
        if flat.numel() != contiguous.numel():
            raise ValueError(f"flat tensor has {flat.numel()} values, the module needs "
                             f"{contiguous.numel()}")
        with torch.no_grad():
            contiguous.copy_(flat)
        return
    _read(_params(module), flat)


def buffers_to_flat(module: nn.Module, out: torch.Tensor | None = None) -> torch.Tensor:
    """All floating-point buffers (e.g. normaliser statistics) as one float64 vector."""
    if out is None:
        out = torch.empty(num_buffer_values(module), dtype=torch.float64)
    return _write(_buffers(module), out)


def flat_to_buffers(module: nn.Module, flat: torch.Tensor) -> None:
    """Copy ``flat`` into ``module``'s floating-point buffers, in :func:`buffers_to_flat`'s
    order; a size mismatch raises ValueError."""
    _read(_buffers(module), flat)


def grads_to_flat(module: nn.Module, out: torch.Tensor | None = None) -> torch.Tensor:
    """All parameter gradients as one float32 vector (zeros where a gradient is None)."""
    params = _params(module)
    grads = module.__dict__.get("_hpcrl_flat_grads")
    if grads is not None and all(p.grad is not None for p in params) and _aliases(
            [p.grad for p in params if p.grad is not None], grads):
        return grads if out is None else out.copy_(grads)
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


def contiguous_parameters(module: nn.Module) -> torch.Tensor:
    """One flat tensor that every parameter of ``module`` is a view of.

    The first call moves the parameters into a fresh contiguous buffer (values unchanged);
    later calls return the same buffer while the parameters still live in it. An optimiser
    stepping this tensor updates the module in place with a handful of vector operations,
    whatever the number of layers.
    """
    params = _params(module)
    flat = _flat_of(module)
    if flat is not None:
        return flat
    flat = torch.empty(sum(p.numel() for p in params), dtype=params[0].dtype,
                       device=params[0].device)
    offset = 0
    with torch.no_grad():
        for p in params:
            n = p.numel()
            flat[offset:offset + n].copy_(p.reshape(-1))
            p.data = flat[offset:offset + n].view_as(p)
            offset += n
    module.__dict__["_hpcrl_flat_params"] = flat
    return flat


def zero_flat_gradients(module: nn.Module) -> torch.Tensor:
    """Zero the gradients, kept as views of one flat tensor that backward accumulates into.

    Backward adds into an existing ``.grad`` in place, so after this call the gradient of the
    next backward pass appears in the returned tensor without any copy.
    """
    params = _params(module)
    grads = module.__dict__.get("_hpcrl_flat_grads")
    if grads is None or not all(p.grad is not None for p in params) or not _aliases(
            [p.grad for p in params if p.grad is not None], grads):
        grads = torch.zeros(sum(p.numel() for p in params), dtype=params[0].dtype,
                            device=params[0].device)
        offset = 0
        for p in params:
            n = p.numel()
            p.grad = grads[offset:offset + n].view_as(p)
            offset += n
        module.__dict__["_hpcrl_flat_grads"] = grads
    else:
        grads.zero_()
    return grads


def _aliases(params: list[torch.Tensor], flat: torch.Tensor) -> bool:
    base, size = flat.data_ptr(), flat.element_size()
    offset = 0
    for p in params:
        if p.data_ptr() != base + offset * size:
            return False
        offset += p.numel()
    return offset == flat.numel()


def share_flat_parameters(module: nn.Module, flat: torch.Tensor) -> None:
    """Record that ``module``'s parameters already are, in order, views of ``flat`` (a slice
    of an enclosing module's vector, say), so reading or writing them all is one copy."""
    if not _aliases(_params(module), flat):
        raise ValueError("the module's parameters are not views of this flat tensor, in order")
    module.__dict__["_hpcrl_flat_params"] = flat
