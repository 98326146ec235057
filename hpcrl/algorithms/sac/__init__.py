"""SAC: its class, :class:`~hpcrl.algorithms.sac.soft_actor_critic.SAC`, and its keys,
``algo.sac.*``, re-exported from the config's data (:mod:`hpcrl.sections.algorithm_keys`)."""
from hpcrl.sections.algorithm_keys import SacConfig

__all__ = ["SacConfig"]
