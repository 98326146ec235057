"""Off-policy algorithms (DQN, SAC, TD3, DDPG, MPO, MPC) and their base, which plug-ins
derive from (``algo.name: module:Class``). They are registered, resolved and built with the
on-policy ones: :mod:`hpcrl.core.algorithms.registry`."""
from __future__ import annotations

from hpcrl.core.algorithms.offpolicy.base import OffPolicyAlgorithm, Segment
from hpcrl.core.algorithms.offpolicy.dqn import DQN
from hpcrl.core.algorithms.offpolicy.mpc import MPC
from hpcrl.core.algorithms.offpolicy.mpo import MPO
from hpcrl.core.algorithms.offpolicy.sac import SAC
from hpcrl.core.algorithms.offpolicy.td3 import DDPG, TD3

__all__ = ["DDPG", "DQN", "MPC", "MPO", "OffPolicyAlgorithm", "SAC", "Segment", "TD3"]
