"""Learning algorithms: each turns batches into gradients and applies gradients.

Every algorithm implements :class:`Algorithm` (``hpcrl.Algorithm``); the on-policy ones
derive from :class:`OnPolicyAlgorithm` and are registered in :data:`ALGORITHMS`, the
off-policy ones from :class:`OffPolicyAlgorithm` in ``OFF_POLICY_ALGORITHMS``.
:func:`algorithm_type` resolves any ``algo.name``, a plug-in's import path included."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from hpcrl.core.actor import ActorCritic
from hpcrl.core.algorithms.a2c import A2C
from hpcrl.core.algorithms.base import OnPolicyAlgorithm
from hpcrl.core.algorithms.capabilities import Capabilities
from hpcrl.core.algorithms.contract import Algorithm
from hpcrl.core.algorithms.impala import IMPALA
from hpcrl.core.algorithms.offpolicy import (
    OFF_POLICY_ALGORITHMS,
    OffPolicyAlgorithm,
    offpolicy_base,
    offpolicy_class,
)
from hpcrl.core.algorithms.plugin import build_algorithm, load_algorithm_class
from hpcrl.core.algorithms.ppo import PPO
from hpcrl.core.reducer import Reducer
from hpcrl.plugins import PluginError, check_kwargs, is_import_path, load

if TYPE_CHECKING:  # annotations only: core does not import config at run time
    from hpcrl.config.schema import AlgoConfig

ALGORITHMS: dict[str, type[OnPolicyAlgorithm]] = {"ppo": PPO, "a2c": A2C, "impala": IMPALA}
# every name algo.name takes as it is
BUILT_IN_ALGOS = tuple(ALGORITHMS) + tuple(OFF_POLICY_ALGORITHMS)


def is_off_policy(name: str) -> bool:
    """Whether ``algo.name`` learns from a replay: an off-policy built-in, or a plug-in
    deriving from :class:`~hpcrl.core.algorithms.offpolicy.OffPolicyAlgorithm` (the one
    question about a plug-in asked before its family's contract is checked)."""
    if not is_import_path(name):
        return name in OFF_POLICY_ALGORITHMS
    cls = load(name, "algo.name")
    return isinstance(cls, type) and issubclass(cls, OffPolicyAlgorithm)


def algorithm_type(name: str) -> type[Algorithm]:
    """The class of ``algo.name``, of either family: a built-in, or a plug-in's
    ``module:Class`` checked against its family's contract."""
    return offpolicy_class(name) if is_off_policy(name) else algorithm_class(name)


def algorithm_class(name: str) -> type[OnPolicyAlgorithm]:
    """The on-policy algorithm ``name``: a built-in, or a plug-in's ``module:Class`` (a
    subclass of :class:`OnPolicyAlgorithm`, refused otherwise with the contract it breaks;
    an off-policy plug-in is :func:`~hpcrl.core.algorithms.offpolicy.offpolicy_class`'s)."""
    if not is_import_path(name):
        return ALGORITHMS[name]
    cls = load_algorithm_class(name, OnPolicyAlgorithm,
                               "hpcrl.PPO, hpcrl.A2C, hpcrl.IMPALA or hpcrl.OnPolicyAlgorithm "
                               "(on-policy; for an off-policy one, from hpcrl.DQN, hpcrl.SAC, "
                               "hpcrl.TD3, hpcrl.DDPG, hpcrl.MPO or hpcrl.OffPolicyAlgorithm)",
                               "policy_loss")
    if cls.storage not in ("gae", "vtrace"):
        raise PluginError(f"config key 'algo.name' ({name}): {cls.__name__}.storage is "
                          f"{cls.storage!r}; it must be 'gae' or 'vtrace'")
    return cls


def algorithm_kind(name: str) -> str:
    """The built-in that ``name`` is run as: itself, or the plug-in's nearest built-in base
    (its minibatches, defaults and schemes are that one's; a direct subclass of
    :class:`OnPolicyAlgorithm` runs as ``impala`` when it wants V-trace batches, else ``a2c``; an
    off-policy plug-in as :func:`~hpcrl.core.algorithms.offpolicy.offpolicy_base` says)."""
    if not is_import_path(name):
        return name
    if is_off_policy(name):
        return offpolicy_base(offpolicy_class(name))
    cls = algorithm_class(name)
    for kind, base in (("impala", IMPALA), ("ppo", PPO), ("a2c", A2C)):
        if issubclass(cls, base):
            return kind
    return "impala" if cls.storage == "vtrace" else "a2c"


def algorithm_capabilities(name: str) -> Capabilities:
    """What ``algo.name`` declares it learns from and supports: its class's
    :class:`~hpcrl.core.algorithms.capabilities.Capabilities` (a plug-in's ``storage``
    attribute decides its storage)."""
    cls = algorithm_type(name)
    caps = cls.capabilities
    storage = getattr(cls, "storage", caps.storage)  # an on-policy class picks its batches
    return caps if caps.storage == storage else replace(caps, storage=storage)


def algorithms_with(test: Callable[[Capabilities], bool]) -> tuple[str, ...]:
    """The built-in algorithms whose capabilities pass ``test``: the choices a refusal names."""
    return tuple(n for n in BUILT_IN_ALGOS if test(algorithm_capabilities(n)))


def check_algorithm_kwargs(config: AlgoConfig) -> None:
    """Refuse ``algo.kwargs`` that the algorithm's constructor does not take."""
    if not config.kwargs:
        return
    if not is_import_path(config.name):
        raise PluginError(f"config key 'algo.kwargs' is for plug-in algorithms (algo.name="
                          f"'module:Class'); {config.name} reads its own algo.* keys")
    cls = algorithm_type(config.name)  # self and the family's arguments come first
    check_kwargs(cls.__init__, config.kwargs, "algo.kwargs", config.name,
                 fixed=1 + len(cls.constructor_args))


def make_algorithm(actor: ActorCritic, config: AlgoConfig, reducer: Reducer | None = None,
                   on_nonfinite: str = "stop") -> OnPolicyAlgorithm:
    """The algorithm named by ``config.name`` over ``actor`` (a plug-in gets
    ``config.kwargs`` as keyword arguments); ``on_nonfinite`` is ``train.on_nonfinite``
    (what a NaN/inf loss term or gradient does)."""
    return build_algorithm(algorithm_class(config.name), config.name,
                           (actor, config, reducer, on_nonfinite), config.kwargs)

__all__ = ["A2C", "ALGORITHMS", "Algorithm", "BUILT_IN_ALGOS", "Capabilities", "IMPALA", "PPO",
           "OffPolicyAlgorithm", "OnPolicyAlgorithm", "algorithm_capabilities",
           "algorithm_class", "algorithm_kind", "algorithm_type",
           "algorithms_with", "check_algorithm_kwargs", "is_off_policy", "make_algorithm"]
