"""Learning algorithms: each turns batches into gradients and applies gradients."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from hpcrl.core.actor import ActorCritic
from hpcrl.core.algorithms.a2c import A2C
from hpcrl.core.algorithms.base import Algorithm
from hpcrl.core.algorithms.capabilities import Capabilities
from hpcrl.core.algorithms.impala import IMPALA
from hpcrl.core.algorithms.offpolicy import OFF_POLICY_ALGORITHMS
from hpcrl.core.algorithms.ppo import PPO
from hpcrl.core.reducer import Reducer
from hpcrl.errors import ExplainedError
from hpcrl.plugins import CONTRACTS, PluginError, check_kwargs, failure, is_import_path, load

if TYPE_CHECKING:  # annotations only: core does not import config at run time
    from hpcrl.config.schema import AlgoConfig

ALGORITHMS: dict[str, type[Algorithm]] = {"ppo": PPO, "a2c": A2C, "impala": IMPALA}
# every name algo.name takes as it is
BUILT_IN_ALGOS = tuple(ALGORITHMS) + tuple(OFF_POLICY_ALGORITHMS)
_CONSTRUCTOR_ARGS = 4  # actor, config, reducer, on_nonfinite: what hpcrl passes itself


def algorithm_class(name: str) -> type[Algorithm]:
    """The on-policy algorithm ``name``: a built-in, or a plug-in's ``module:Class`` (a
    subclass of :class:`Algorithm`, refused otherwise with the contract it breaks)."""
    if not is_import_path(name):
        return ALGORITHMS[name]
    cls = load(name, "algo.name")
    if not (isinstance(cls, type) and issubclass(cls, Algorithm)):
        raise PluginError(f"config key 'algo.name' ({name}): {cls!r} is not a subclass of "
                          f"hpcrl.Algorithm; derive it from hpcrl.PPO, hpcrl.A2C, hpcrl.IMPALA "
                          f"or hpcrl.Algorithm ({CONTRACTS})")
    missing = sorted(getattr(cls, "__abstractmethods__", ()))
    if missing:
        raise PluginError(f"config key 'algo.name' ({name}): {cls.__name__} does not define "
                          f"{', '.join(missing)} ({CONTRACTS})")
    if not cls.stat_names or not all(isinstance(s, str) for s in cls.stat_names):
        raise PluginError(f"config key 'algo.name' ({name}): {cls.__name__}.stat_names must "
                          f"name the loss terms its loss() reports, e.g. ('policy_loss',)")
    if cls.storage not in ("gae", "vtrace"):
        raise PluginError(f"config key 'algo.name' ({name}): {cls.__name__}.storage is "
                          f"{cls.storage!r}; it must be 'gae' or 'vtrace'")
    return cls


def algorithm_kind(name: str) -> str:
    """The built-in that ``name`` is run as: itself, or the plug-in's nearest built-in base
    (its minibatches, defaults and schemes are that one's; a direct subclass of
    :class:`Algorithm` runs as ``impala`` when it wants V-trace batches, else ``a2c``)."""
    if not is_import_path(name):
        return name
    cls = algorithm_class(name)
    for kind, base in (("impala", IMPALA), ("ppo", PPO), ("a2c", A2C)):
        if issubclass(cls, base):
            return kind
    return "impala" if cls.storage == "vtrace" else "a2c"


def algorithm_capabilities(name: str) -> Capabilities:
    """What ``algo.name`` declares it learns from and supports: its class's
    :class:`~hpcrl.core.algorithms.capabilities.Capabilities` (a plug-in's ``storage``
    attribute decides its storage)."""
    if name in OFF_POLICY_ALGORITHMS:
        return OFF_POLICY_ALGORITHMS[name].capabilities
    cls = algorithm_class(name)
    caps = cls.capabilities
    return caps if caps.storage == cls.storage else replace(caps, storage=cls.storage)


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
    check_kwargs(algorithm_class(config.name).__init__, config.kwargs, "algo.kwargs",
                 config.name, fixed=1 + _CONSTRUCTOR_ARGS)


def make_algorithm(actor: ActorCritic, config: AlgoConfig, reducer: Reducer | None = None,
                   on_nonfinite: str = "stop") -> Algorithm:
    """The algorithm named by ``config.name`` over ``actor`` (a plug-in gets
    ``config.kwargs`` as keyword arguments); ``on_nonfinite`` is ``train.on_nonfinite``
    (what a NaN/inf loss term or gradient does)."""
    cls = algorithm_class(config.name)
    if not is_import_path(config.name):
        return cls(actor, config, reducer, on_nonfinite)
    try:
        return cls(actor, config, reducer, on_nonfinite, **config.kwargs)
    except ExplainedError:
        raise
    except Exception as err:  # the user's constructor may fail in any way
        raise PluginError(f"config key 'algo.name' ({config.name}): building it as "
                          f"{cls.__name__}(actor, config, reducer, on_nonfinite, "
                          f"**algo.kwargs) failed: {failure(err)}") from None


__all__ = ["A2C", "ALGORITHMS", "Algorithm", "BUILT_IN_ALGOS", "Capabilities", "IMPALA", "PPO",
           "algorithm_capabilities", "algorithm_class", "algorithm_kind", "algorithms_with",
           "check_algorithm_kwargs", "make_algorithm"]
