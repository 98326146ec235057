"""The machine a benchmark ran on, printed beside its figures.

Machines of one kind differ in their CPU (some AMD EPYC and Intel Xeon cores have
AVX512-BF16 or AMX, others AVX2 only), and the libraries pick their kernels from it: torch's
ATen (AVX2 or AVX512), oneDNN's convolutions (bfloat16 natively or emulated), numpy's SIMD
loops (float32 tanh and exp have AVX512 forms) and OpenBLAS's GEMM (a Haswell or SkylakeX
kernel). A figure only compares with another taken on the same CPU, so every benchmark
prints :func:`machine_line` first and a figure of docs/benchmarks.md quotes it.

Variables that make these libraries act as on a CPU with fewer features
(``ATEN_CPU_CAPABILITY``, ``NPY_DISABLE_CPU_FEATURES``, ``OPENBLAS_CORETYPE``,
``DNNL_MAX_CPU_ISA``, ``MKL_ENABLE_INSTRUCTIONS``) are printed when set, since a figure
taken under them is not the hardware's own. :data:`AVX2_ONLY` holds the set that emulates an
AVX2-only CPU (``--as-avx2`` in the benchmarks that take it).
"""
from __future__ import annotations

import os
import platform
from typing import Any

RELEVANT_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16",
                  "amx_tile")
LIBRARY_OVERRIDES = ("ATEN_CPU_CAPABILITY", "NPY_DISABLE_CPU_FEATURES", "OPENBLAS_CORETYPE",
                     "DNNL_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS")
# every library's dispatch held to AVX2 + FMA, as on a CPU without AVX-512
AVX2_ONLY = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR",  # numpy 2.4's targets
    "OPENBLAS_CORETYPE": "Haswell",
    "DNNL_MAX_CPU_ISA": "AVX2",
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",
}


def cpu_info() -> dict[str, Any]:
    """The CPU's model name, logical CPUs and the flags of :data:`RELEVANT_FLAGS` it has
    (from /proc/cpuinfo; the platform's processor string elsewhere)."""
    model, flags = platform.processor() or platform.machine(), set()
    try:
        text = open("/proc/cpuinfo").read()
    except OSError:
        text = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and model in ("", platform.machine(),
                                                     platform.processor()):
            model = value.strip()
        elif key.strip() == "flags" and not flags:
            flags = set(value.split())
    return {"model": model, "cpus": os.cpu_count(),
            "flags": [f for f in RELEVANT_FLAGS if f in flags]}


def libraries() -> dict[str, str]:
    """What the libraries picked on this CPU: torch's ATen capability, numpy's best SIMD
    target, OpenBLAS's kernel, and the versions."""
    out: dict[str, str] = {}
    try:
        import torch

        out["torch"] = f"{torch.__version__} ({torch.backends.cpu.get_cpu_capability()})"
    except ImportError:
        pass
    try:
        import numpy as np

        try:
            from numpy._core._multiarray_umath import __cpu_features__ as features
        except ImportError:
            from numpy.core._multiarray_umath import __cpu_features__ as features
        best = next((name for name in ("AVX512_SPR", "AVX512_ICL", "X86_V4", "AVX512_SKX",
                                       "X86_V3", "AVX2") if features.get(name)), "baseline")
        out["numpy"] = f"{np.__version__} ({best})"
    except ImportError:
        pass
    try:
        from threadpoolctl import threadpool_info

        blas = [f"{i.get('internal_api')} {i.get('architecture') or ''}".strip()
                for i in threadpool_info() if i.get("user_api") == "blas"]
        if blas:
            out["blas"] = ", ".join(sorted(set(blas)))
    except ImportError:
        pass
    return out


def machine_line() -> str:
    """One line: the CPU model, CPUs, its relevant flags, what the libraries picked, and any
    override of their dispatch (a figure taken under one is not the hardware's)."""
    cpu, libs = cpu_info(), libraries()
    flags = " ".join(cpu["flags"]) or "none of " + "/".join(RELEVANT_FLAGS)
    text = (f"machine: {cpu['model']}, {cpu['cpus']} CPUs, flags: {flags}; "
            + "; ".join(f"{name} {value}" for name, value in libs.items()))
    overrides = [f"{k}={os.environ[k]}" for k in LIBRARY_OVERRIDES if k in os.environ]
    if overrides:
        text += f"; dispatch held back by {' '.join(overrides)}"
    return text


if __name__ == "__main__":
    print(machine_line())
