"""CPU settings that make the off-policy learner's gradient steps cheaper, not different.

- :func:`retain_freed_memory`: a learner step allocates and frees the same few dozen
  activation tensors of 0.1-2 MB every gradient step. glibc serves blocks that large with
  fresh ``mmap`` pages (or trims them off the heap when freed), so every step pays for
  hundreds of page faults, about a tenth of an off-policy step. Raising the mmap and trim
  thresholds lets freed blocks be reused. It changes where freed memory waits, never what
  is computed; on other C libraries it does nothing.
- :func:`flush_denormals`: the Adam moments of weights whose gradient is exactly zero (dead
  ReLU units) decay into subnormal floats and stay there (``0.9 x`` the smallest subnormal
  rounds back to it), and arithmetic on subnormals is many times slower. Inside the
  context they count as zero. It is entered only around gradient steps, so env physics
  and everything else keep IEEE semantics.
- :func:`set_compute_threads`: ``train.torch_threads`` bounds every math library of the
  process, torch's and numpy's BLAS alike (the numpy MLP kernel and the collectors' policy
  run there): left alone, OpenBLAS starts one thread per core of the node in every rank.
- :func:`startup_objects_frozen`: importing torch leaves ~175k objects that Python's cyclic
  garbage collector walks on every full collection (~0.15 s each here, several a minute in
  a loop that allocates as a learner does). Frozen while the run trains, they are not
  walked; garbage made meanwhile is collected as before, and when training ends they are
  handed back to the collector (so a process that trains again frees the old run).
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
import sys
from collections.abc import Iterator

import torch
from threadpoolctl import threadpool_limits

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
THRESHOLD_BYTES = 256 << 20

_retained = False


def retain_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds once per process; True if it took effect."""
    global _retained
    if _retained:
        return True
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    _retained = bool(mallopt(M_MMAP_THRESHOLD, THRESHOLD_BYTES // 4)
                     and mallopt(M_TRIM_THRESHOLD, THRESHOLD_BYTES))
    return _retained


def set_compute_threads(threads: int) -> None:
    """Run torch's intra-op work and numpy's BLAS on ``threads`` threads (0: leave both
    as their libraries chose)."""
    if threads:
        torch.set_num_threads(threads)
        threadpool_limits(threads, user_api="blas")


@contextlib.contextmanager
def flush_denormals() -> Iterator[None]:
    """Treat subnormal floats as zero in this thread while the context is open."""
    enabled = torch.set_flush_denormal(True)
    try:
        yield
    finally:
        if enabled:
            torch.set_flush_denormal(False)


@contextlib.contextmanager
def startup_objects_frozen() -> Iterator[None]:
    """Inside: every object alive on entry (imports, config, networks, envs) is out of the
    garbage collector's generations, so full collections skip it."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
