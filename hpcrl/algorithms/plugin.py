"""Loading a user's algorithm class by import path, and the contract every family shares.

``algo.name: module:Class`` names an on-policy class (a subclass of
:class:`~hpcrl.algorithms.on_policy.OnPolicyAlgorithm`) or an off-policy one (of
:class:`~hpcrl.algorithms.off_policy.OffPolicyAlgorithm`); the registry's one
resolver (:func:`~hpcrl.algorithms.registry.algorithm_type`) asks the family's base
for its own extra terms after :func:`load_algorithm_class`.
"""
from __future__ import annotations

from typing import Any

from hpcrl.algorithms.algorithm import Algorithm
from hpcrl.components.import_paths import CONTRACTS, PluginError, failure, is_import_path, load
from hpcrl.errors import ExplainedError


def load_algorithm_class(name: str, bases: tuple[type[Any], ...], derive_from: str
                         ) -> type[Any]:
    """The class at import path ``name``: a concrete subclass of one of ``bases`` (the
    families' bases) whose ``stat_names`` name its loss terms. Each breach is a
    :class:`PluginError` naming the class and the fix (``derive_from``: the bases to derive
    from, for the message)."""
    cls = load(name, "algo.name")
    if not (isinstance(cls, type) and issubclass(cls, bases)):
        if isinstance(cls, type) and issubclass(cls, Algorithm):
            raise PluginError(f"config key 'algo.name' ({name}): {cls.__name__} derives from "
                              f"hpcrl.Algorithm, the contract both families implement, but "
                              f"from neither family's base; derive it from {derive_from} "
                              f"({CONTRACTS})")
        named = " or ".join(f"hpcrl.{b.__name__}" for b in bases)
        raise PluginError(f"config key 'algo.name' ({name}): {cls!r} is not a subclass of "
                          f"{named}; derive it from {derive_from} ({CONTRACTS})")
    missing = sorted(getattr(cls, "__abstractmethods__", ()))
    if missing:
        raise PluginError(f"config key 'algo.name' ({name}): {cls.__name__} does not define "
                          f"{', '.join(missing)} ({CONTRACTS})")
    stat_names = getattr(cls, "stat_names", ())
    if not stat_names or not all(isinstance(s, str) for s in stat_names):
        raise PluginError(f"config key 'algo.name' ({name}): {cls.__name__}.stat_names must "
                          f"name the loss terms its loss() reports, e.g. "
                          f"{getattr(cls, 'stat_example', ('loss',))!r}")
    return cls


def build_algorithm(cls: type[Any], name: str, args: tuple[Any, ...],
                    kwargs: dict[str, Any]) -> Any:
    """``cls(*args)`` for the built-in ``name``; for a plug-in ``cls(*args, **kwargs)``
    (``algo.kwargs``), where any failure of the user's constructor becomes a
    :class:`PluginError` naming the call (``args`` as the contract's ``constructor_args``)
    and the cause."""
    signature = ", ".join(cls.constructor_args)
    if not is_import_path(name):
        return cls(*args)
    try:
        return cls(*args, **kwargs)
    except ExplainedError:
        raise
    except Exception as err:  # the user's constructor may fail in any way
        raise PluginError(f"config key 'algo.name' ({name}): building it as "
                          f"{cls.__name__}({signature}, **algo.kwargs) failed: "
                          f"{failure(err)}") from None
