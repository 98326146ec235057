"""TD3 and DDPG, which it extends (twin critics, delayed policy, target smoothing): their
``algo.td3.*`` and ``algo.ddpg.*`` keys, torch-free, and their classes in
:mod:`~hpcrl.algorithms.td3.twin_delayed`."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from hpcrl.field_docs import doc


@dataclass
class DdpgConfig:
    """DDPG's exploration noise (``algo.ddpg.*``; TD3's section adds its own keys)."""

    action_noise: Literal["none", "gaussian", "ornstein_uhlenbeck"] = doc(
        "Exploration noise added to the deterministic action ('ornstein_uhlenbeck' is "
        "temporally correlated, reset at episode ends).", "gaussian")
    noise_std: float = doc("Std of the exploration noise, in units of half the action range "
                           "(actions live in [-1, 1] before scaling).", 0.1)
    ou_theta: float = doc("Ornstein-Uhlenbeck noise: rate of mean reversion.", 0.15)
    ou_dt: float = doc("Ornstein-Uhlenbeck noise: time step.", 1e-2)


@dataclass
class Td3Config(DdpgConfig):
    """TD3's exploration noise, policy delay, target smoothing and twin critics
    (``algo.td3.*``)."""

    policy_delay: int = doc("Critic gradient steps per policy (and target) update.", 2)
    target_policy_noise: float = doc("Std of the noise on the target policy's action (target "
                                     "policy smoothing).", 0.2)
    target_noise_clip: float = doc("Clip of the target policy noise.", 0.5)
    n_critics: int = doc("Critics whose minimum makes the target.", 2)
