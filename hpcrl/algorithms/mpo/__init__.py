"""MPO: its class, :class:`~hpcrl.algorithms.mpo.maximum_a_posteriori.MPO`, and its ``algo.mpo.*``,
re-exported from the config's data (:mod:`hpcrl.sections.algorithm_keys`)."""
from hpcrl.sections.algorithm_keys import MpoConfig

__all__ = ["MpoConfig"]
