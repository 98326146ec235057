"""DQN: ``algo.dqn.*`` (epsilon-greedy exploration, double Q; no torch here) and the class,
:class:`~hpcrl.algorithms.dqn.q_learning.DQN`."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from hpcrl.field_docs import doc


@dataclass
class DqnConfig:
    """DQN's target and epsilon-greedy exploration (``algo.dqn.*``); a plug-in that derives
    from ``hpcrl.OffPolicyAlgorithm`` with discrete actions explores with these too.
    Defaults: RL-zoo's CartPole recipe."""

    double_q: bool = doc("Pick the next action with the online network and value it with the "
                         "target network (double Q-learning).", False)
    exploration_initial_eps: float = doc("Initial probability of a random action.", 1.0)
    exploration_final_eps: float = doc("Final probability of a random action.", 0.04)
    exploration_fraction: float = doc("Fraction of train.total_env_steps over which the "
                                      "random-action probability decays linearly.", 0.16)
    per_collector_eps: bool = doc(
        "On collector ranks (Ape-X): collector i of N acts with the fixed epsilon "
        "collector_eps_base ** (1 + collector_eps_alpha * i / (N - 1)) instead of the "
        "decaying schedule, so the collectors explore from a lot to hardly at all.", False)
    collector_eps_base: float = doc("Ape-X epsilon schedule: the base epsilon.", 0.4)
    collector_eps_alpha: float = doc("Ape-X epsilon schedule: the exponent's spread.", 7.0)
    initial_priorities: Literal["max", "collector"] = doc(
        "Prioritised replay: the priority of a new transition. 'max': the largest seen so "
        "far (replayed soon, Schaul et al.); 'collector': its |n-step TD error| computed by "
        "the collector with its copy of the Q-network (Ape-X).", "max")
