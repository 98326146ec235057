"""Global random-number-generator states of a process, as checkpoint-safe plain data."""
from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch

from hpcrl.envs.state import from_plain, to_plain


def seed_everything(seed: int) -> None:
    """Seed Python's, numpy's and torch's global generators."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def rng_state() -> dict[str, Any]:
    """Python's, numpy's and torch's global generator states as plain data, for a checkpoint."""
    return {"python": to_plain(random.getstate()), "numpy": to_plain(np.random.get_state()),
            "torch": torch.get_rng_state()}


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore the generator states :func:`rng_state` gave."""
    random.setstate(from_plain(state["python"]))
    np.random.set_state(from_plain(state["numpy"]))
    torch.set_rng_state(state["torch"])
