"""IMPALA: the learner, :class:`~hpcrl.algorithms.impala.vtrace_learner.IMPALA`, and the
V-trace clips of ``algo.impala.*``, re-exported from the config's data
(:mod:`hpcrl.sections.algorithm_keys`)."""
from hpcrl.sections.algorithm_keys import ImpalaConfig

__all__ = ["ImpalaConfig"]
