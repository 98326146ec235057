"""Lazy access to mpi4py's ``MPI`` module.

Importing mpi4py initialises MPI, so the rest of ``hpcrl.comm`` asks for the
module only when it is needed. That keeps ``import hpcrl.comm`` cheap and lets
single-process tools run where mpi4py is missing or MPI cannot start.
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Any


class MpiUnavailableError(RuntimeError):
    """mpi4py could not be imported, or MPI could not be initialised."""


@functools.cache
def _load() -> tuple[ModuleType | None, str]:
    """Import ``mpi4py.MPI`` once; return the module or the reason it failed."""
    try:
        from mpi4py import MPI
    except Exception as exc:  # ImportError, or MPI_Init failing at import time
        return None, f"{type(exc).__name__}: {exc}"
    return MPI, ""


def try_mpi() -> ModuleType | None:
    """The ``mpi4py.MPI`` module, or None when it cannot be loaded."""
    return _load()[0]


def unavailable_reason() -> str:
    """Why ``try_mpi()`` returned None (empty when MPI loaded fine)."""
    return _load()[1]


def mpi() -> ModuleType:
    """The ``mpi4py.MPI`` module; raises MpiUnavailableError naming the cause."""
    module, reason = _load()
    if module is None:
        raise MpiUnavailableError(
            f"mpi4py is required here but could not be loaded ({reason}); "
            "install mpi4py and an MPI runtime (e.g. `pip install mpi4py mpich`)"
        )
    return module


# What the functions of hpcrl.comm accept as a communicator: an
# ``mpi4py.MPI.Intracomm`` or the single-process ``world.SelfComm`` stand-in.
# Kept as ``Any`` so that annotating it never imports mpi4py.
Comm = Any
