"""DQN: the class, :class:`~hpcrl.algorithms.dqn.q_learning.DQN`, and ``algo.dqn.*``
(epsilon-greedy exploration, double Q), re-exported from the config's data
(:mod:`hpcrl.sections.algorithm_keys`)."""
from hpcrl.sections.algorithm_keys import DqnConfig

__all__ = ["DqnConfig"]
