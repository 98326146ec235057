"""Off-policy algorithms (DQN, SAC, TD3, DDPG, MPO, MPC) and their base, which plug-ins
derive from (``algo.name: module:Class``). They are registered, resolved and built with the
on-policy ones: :mod:`hpcrl.algorithms.registry`."""
from __future__ import annotations

from hpcrl.algorithms.off_policy import OffPolicyAlgorithm, Segment
from hpcrl.algorithms.offpolicy.dqn import DQN
from hpcrl.algorithms.offpolicy.mpc import MPC
from hpcrl.algorithms.offpolicy.mpo import MPO
from hpcrl.algorithms.offpolicy.sac import SAC
from hpcrl.algorithms.offpolicy.td3 import DDPG, TD3

__all__ = ["DDPG", "DQN", "MPC", "MPO", "OffPolicyAlgorithm", "SAC", "Segment", "TD3"]
