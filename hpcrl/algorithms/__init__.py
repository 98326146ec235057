"""Learning algorithms: each turns batches into gradients and applies gradients.

Every algorithm implements :class:`Algorithm` (``hpcrl.Algorithm``), the on-policy ones by
deriving from :class:`OnPolicyAlgorithm` (:mod:`~hpcrl.algorithms.on_policy`), the
off-policy ones from :class:`OffPolicyAlgorithm` (:mod:`~hpcrl.algorithms.off_policy`).
One registry (:data:`ALGORITHMS`, :mod:`~hpcrl.algorithms.registry`) holds both families,
one resolver (:func:`algorithm_type`) takes any ``algo.name``, a plug-in's import path
included, and one constructor (:func:`make_algorithm`) builds every algorithm alike.

Each built-in has a folder (``ppo/``, ``a2c/``, ``impala/``, ``dqn/``, ``sac/``, ``td3/``
with DDPG, ``mpo/``, ``mpc/``): a module of a name of its own
(``ppo/clipped_surrogate.py``) holds its class, which declares its section, defaults and
key rules, and its package's ``__init__`` re-exports the dataclass of its own section's
keys, which is the config's data (:mod:`hpcrl.sections.algorithm_keys`: the config's
``AlgoConfig`` holds it, below every layer that names it). This package is light: its
names are imported on first use (:func:`__getattr__`), so that importing it or a
built-in's keys (``from hpcrl.algorithms.dqn import DqnConfig``) loads no torch or
gymnasium."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names as type checkers see them; at run time, __getattr__
    from hpcrl.algorithms.a2c.advantage_actor_critic import A2C
    from hpcrl.algorithms.algorithm import CONSTRUCTOR, Algorithm
    from hpcrl.algorithms.capabilities import Capabilities
    from hpcrl.algorithms.dqn.q_learning import DQN
    from hpcrl.algorithms.impala.vtrace_learner import IMPALA
    from hpcrl.algorithms.mpc.model_predictive import MPC
    from hpcrl.algorithms.mpo.maximum_a_posteriori import MPO
    from hpcrl.algorithms.off_policy import OffPolicyAlgorithm
    from hpcrl.algorithms.on_policy import OnPolicyAlgorithm
    from hpcrl.algorithms.ppo.clipped_surrogate import PPO
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
    from hpcrl.algorithms.sac.soft_actor_critic import SAC
    from hpcrl.algorithms.td3.twin_delayed import DDPG, TD3

__all__ = ["A2C", "ALGORITHMS", "Algorithm", "BUILT_IN_ALGOS", "CONSTRUCTOR", "Capabilities",
           "DDPG", "DQN", "IMPALA", "MPC", "MPO", "PPO", "SAC", "TD3", "OffPolicyAlgorithm",
           "OnPolicyAlgorithm", "action_space_problem", "algorithm_capabilities",
           "algorithm_class", "algorithm_defaults", "algorithm_kind", "algorithm_type",
           "algorithms_with", "builtin_sections", "check_algorithm_kwargs", "make_algorithm",
           "make_policy"]


def __getattr__(name: str) -> Any:
    """A public name of the package, imported when first asked: the registry imports every
    class and function of :data:`__all__` (torch with them), so only a caller that needs
    an algorithm pays for it."""
    if name not in __all__:
        raise AttributeError(f"module 'hpcrl.algorithms' has no attribute {name!r}")
    import hpcrl.algorithms.registry as registry

    value = getattr(registry, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The package's public names beside what it has loaded (for ``dir`` and completion)."""
    return sorted({*globals(), *__all__})
