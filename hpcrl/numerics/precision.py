"""The number format networks compute in (``actor.compute_dtype``), and whether a device has
fast arithmetic for it.

``bfloat16`` keeps float32's exponent range with an 8-bit significand: products need no loss
scaling, which is why it is the one reduced format offered. Networks that take it run their
heavy layers under :func:`torch.autocast` and hand float32 on, so weights, gradients, the
optimiser, the all-reduce and checkpoints never see it.
"""
from __future__ import annotations

import contextlib
import warnings
from contextlib import AbstractContextManager

import torch

COMPUTE_DTYPES: dict[str, torch.dtype | None] = {"float32": None,
                                                    "bfloat16": torch.bfloat16}
DTYPE_NAMES: dict[torch.dtype, str] = {dtype: name for name, dtype in COMPUTE_DTYPES.items()
                                       if dtype is not None}
_warned: set[str] = set()


def compute_dtype(name: str) -> torch.dtype | None:
    """The autocast dtype of ``actor.compute_dtype`` ``name``; None for plain float32."""
    try:
        return COMPUTE_DTYPES[name]
    except KeyError:
        raise ValueError(f"unknown compute dtype {name!r}; use one of "
                         f"{sorted(COMPUTE_DTYPES)}") from None


def native_bfloat16(device: torch.device) -> bool:
    """Whether ``device`` multiplies bfloat16 in hardware: a CPU with AVX512-BF16 or AMX
    (oneDNN's bfloat16 kernels), a GPU that torch says supports it. Elsewhere torch emulates
    it, slower than float32."""
    if device.type == "cpu":  # torch's own probes (private; absent ones count as no)
        probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
        return any(getattr(torch.cpu, name, lambda: False)() for name in probes)
    if device.type == "cuda":
        return bool(torch.cuda.is_bf16_supported(including_emulation=False))
    return False


def autocast(device: torch.device, dtype: torch.dtype | None) -> AbstractContextManager:
    """Autocast to ``dtype`` on ``device`` (nothing for None), warning once per process and
    device type when the device would only emulate it."""
    if dtype is None:
        return contextlib.nullcontext()
    if device.type not in _warned:
        _warned.add(device.type)
        if not native_bfloat16(device):
            warnings.warn(
                f"hpcrl: actor.compute_dtype=bfloat16 on a {device.type} without native "
                f"bfloat16 arithmetic (a CPU needs AVX512-BF16 or AMX): torch emulates it, "
                f"slower than float32; set actor.compute_dtype=float32 here", RuntimeWarning,
                stacklevel=3)
    return torch.autocast(device.type, dtype=dtype)
