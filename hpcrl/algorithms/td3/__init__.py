"""TD3 and DDPG, which it extends (twin critics, delayed policy, target smoothing): their classes in
:mod:`~hpcrl.algorithms.td3.twin_delayed`, and their ``algo.td3.*`` and ``algo.ddpg.*`` keys,
re-exported from the config's data (:mod:`hpcrl.sections.algorithm_keys`)."""
from hpcrl.sections.algorithm_keys import DdpgConfig, Td3Config

__all__ = ["DdpgConfig", "Td3Config"]
