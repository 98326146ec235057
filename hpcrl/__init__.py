"""hpcrl: reinforcement learning on HPC clusters, from one process to many MPI ranks."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from hpcrl.core.actor import ActorCritic


def load_policy(path: Any) -> "ActorCritic":
    """The trained actor of a run directory or checkpoint (see :mod:`hpcrl.policy`)."""
    from hpcrl.policy import load_policy as _load

    return _load(path)


__all__ = ["__version__", "load_policy"]
