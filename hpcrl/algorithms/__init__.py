"""Learning algorithms: each turns batches into gradients and applies gradients.

Every algorithm implements :class:`Algorithm` (``hpcrl.Algorithm``), the on-policy ones by
deriving from :class:`OnPolicyAlgorithm`, the off-policy ones from
:class:`~hpcrl.algorithms.offpolicy.OffPolicyAlgorithm`. One registry
(:data:`ALGORITHMS`, :mod:`~hpcrl.algorithms.registry`) holds both families, one
resolver (:func:`algorithm_type`) takes any ``algo.name``, a plug-in's import path
included, and one constructor (:func:`make_algorithm`) builds every algorithm alike."""
from __future__ import annotations

from hpcrl.algorithms.a2c import A2C
from hpcrl.algorithms.algorithm import CONSTRUCTOR, Algorithm
from hpcrl.algorithms.capabilities import Capabilities
from hpcrl.algorithms.impala import IMPALA
from hpcrl.algorithms.offpolicy import OffPolicyAlgorithm
from hpcrl.algorithms.on_policy import OnPolicyAlgorithm
from hpcrl.algorithms.ppo import PPO
from hpcrl.algorithms.registry import (
    ALGORITHMS,
    BUILT_IN_ALGOS,
    action_space_problem,
    algorithm_capabilities,
    algorithm_class,
    algorithm_defaults,
    algorithm_kind,
    algorithm_type,
    algorithms_with,
    builtin_sections,
    check_algorithm_kwargs,
    make_algorithm,
    make_policy,
)

__all__ = ["A2C", "ALGORITHMS", "Algorithm", "BUILT_IN_ALGOS", "CONSTRUCTOR", "Capabilities",
           "IMPALA", "PPO", "OffPolicyAlgorithm", "OnPolicyAlgorithm", "action_space_problem",
           "algorithm_capabilities", "algorithm_class", "algorithm_defaults", "algorithm_kind",
           "algorithm_type", "algorithms_with", "builtin_sections", "check_algorithm_kwargs",
           "make_algorithm", "make_policy"]
