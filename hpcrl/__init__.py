"""hpcrl: reinforcement learning on HPC clusters, from one process to many MPI ranks.

The Python API (:mod:`hpcrl.api`): :func:`make_config`, :func:`train`, :func:`resume`,
:func:`load_policy`; :class:`Algorithm`, the contract every algorithm implements, and the
bases of your own, on-policy (:class:`OnPolicyAlgorithm`, :class:`PPO`, :class:`A2C`,
:class:`IMPALA`) and off-policy (:class:`OffPolicyAlgorithm`, :class:`DQN`, :class:`SAC`,
:class:`TD3`, :class:`DDPG`, :class:`MPO`, :class:`MPC`), with the :class:`Capabilities`
each declares; and the contracts of components (:mod:`hpcrl.components.contracts`). Names
are imported on first use, so ``import hpcrl`` stays cheap.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    import torch

_LAZY = {"make_config": "hpcrl.api", "train": "hpcrl.api", "resume": "hpcrl.api",
         "TrainResult": "hpcrl.api", "Algorithm": "hpcrl.algorithms",
         "PPO": "hpcrl.algorithms", "A2C": "hpcrl.algorithms",
         "IMPALA": "hpcrl.algorithms",
         "RolloutBatch": "hpcrl.buffers.rollout_storage",
         "RecurrentBatch": "hpcrl.buffers.rollout_storage",
         "SequenceBatch": "hpcrl.buffers.vtrace_storage",
         "Network": "hpcrl.components.contracts", "Capabilities": "hpcrl.algorithms",
         "OffPolicyAlgorithm": "hpcrl.algorithms",
         "OnPolicyAlgorithm": "hpcrl.algorithms",
         "DQN": "hpcrl.algorithms", "SAC": "hpcrl.algorithms",
         "TD3": "hpcrl.algorithms", "DDPG": "hpcrl.algorithms",
         "MPO": "hpcrl.algorithms", "MPC": "hpcrl.algorithms",
         "ReplayBatch": "hpcrl.buffers.replay.buffer"}


def load_policy(path: Any, device: Any = "cpu", best: bool = False) -> torch.nn.Module:
    """The trained actor of a run directory or checkpoint; ``best=True``: the one that
    scored best in the evaluations during training (see :mod:`hpcrl.trained.loading`)."""
    from hpcrl.trained.loading import load_policy as _load

    return _load(path, device, best)


def __getattr__(name: str) -> Any:
    """The API's names, imported when first used."""
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'hpcrl' has no attribute {name!r}")


__all__ = ["__version__", "load_policy", *sorted(_LAZY)]
