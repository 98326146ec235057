"""Shared fixtures: tiny configs that train in seconds."""
from __future__ import annotations

import os

import pytest
import torch

os.environ.setdefault("OMP_NUM_THREADS", "1")
torch.set_num_threads(1)

TINY = ["env.num_envs=4", "algo.num_steps=16", "algo.minibatch_size=32", "algo.num_epochs=2",
        "train.total_env_steps=1024", "train.eval_episodes=0", "train.tensorboard=false",
        "train.checkpoint_every=4"]


@pytest.fixture
def tiny_overrides() -> list[str]:
    """Overrides that make the default PPO job train in about a second."""
    return list(TINY)
