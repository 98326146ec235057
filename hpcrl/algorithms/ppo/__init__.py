"""PPO: its class, :class:`~hpcrl.algorithms.ppo.clipped_surrogate.PPO`, and its section's keys
(``algo.ppo.*``), re-exported from the config's data (:mod:`hpcrl.sections.algorithm_keys`)."""
from hpcrl.sections.algorithm_keys import PpoConfig

__all__ = ["PpoConfig"]
