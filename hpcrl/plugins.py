"""User components by import path: ``module:Name``, Gymnasium's syntax.

A config names a user's class where it names a component (``algo.name``, ``actor.network``,
``env.wrappers``), so the CLI, ``mpirun``/``srun`` and the Slurm templates import the same
code on every rank. This module imports those paths, checks a component's keyword arguments
against its signature, and turns a class handed over in Python back into its path (the form
configs, run directories and checkpoints keep).

Every problem is a :class:`PluginError` naming the config key, the path and the fix, raised
while the config is checked, before any rank starts work.
"""
from __future__ import annotations

import importlib
import inspect
import sys
from pathlib import Path
from typing import Any, Callable, Mapping

from hpcrl.errors import ExplainedError

CONTRACTS = "the contracts in hpcrl/contracts.py (README: Writing your own components)"


class PluginError(ExplainedError, ValueError):
    """A user component that cannot be imported or does not meet its contract."""


def is_import_path(value: object) -> bool:
    """``value`` is a ``module:Name`` string (a plug-in), not a built-in's name."""
    return isinstance(value, str) and ":" in value


def load(path: str, key: str) -> Any:
    """The object at ``module:Name`` (``Name`` may be dotted), for config key ``key``."""
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise PluginError(f"config key '{key}' ({path!r}): an import path is 'module:Name', "
                          f"e.g. 'mylab.nets:Encoder'")
    try:
        module = importlib.import_module(module_name)
    except Exception as err:  # the user's module may fail in any way while importing
        where = ("" if module_name in sys.modules or not Path(module_name).suffix else
                 " (a module name, not a file name)")
        raise PluginError(f"config key '{key}' ({path!r}): importing module '{module_name}'"
                          f"{where} failed: {type(err).__name__}: {err}; make it importable "
                          f"on every rank (pip install -e your package, or put its directory "
                          f"on PYTHONPATH)") from None
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise PluginError(f"config key '{key}' ({path!r}): module '{module_name}' has no "
                              f"attribute '{attr}'")
        obj = getattr(obj, part)
    return obj


def path_of(obj: Any) -> str:
    """The ``module:Name`` of a class or function (one defined in the script being run is
    named by the script's module name, so that other ranks and later loads import it)."""
    if isinstance(obj, str):
        return obj
    module = getattr(obj, "__module__", None)
    name = getattr(obj, "__qualname__", None)
    if module is None or name is None or "<locals>" in name:
        raise PluginError(f"{obj!r} cannot be named by an import path: define it at the top "
                          f"level of a module")
    if module == "__main__":
        script = getattr(sys.modules["__main__"], "__file__", None)
        if script is None:
            raise PluginError(f"{name} is defined in an interactive session; define it in a "
                              f"module or script so every rank can import it")
        module = Path(script).stem
    return f"{module}:{name}"


def check_kwargs(factory: Callable[..., Any], kwargs: Mapping[str, Any], key: str,
                 path: str, fixed: int = 0) -> None:
    """Refuse ``kwargs`` that ``factory`` does not take (after its first ``fixed``
    positional arguments), or required arguments that they leave out."""
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return  # a builtin without a readable signature: it will say so itself
    params = list(signature.parameters.values())[fixed:]
    takes_any = any(p.kind is p.VAR_KEYWORD for p in params)
    named = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    unknown = [k for k in kwargs if k not in named and not takes_any]
    if unknown:
        takes = ", ".join(named) if named else "none"
        raise PluginError(f"config key '{key}': {path} takes no argument "
                          f"'{unknown[0]}' (it takes: {takes})")
    missing = [p.name for p in params
               if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
               and p.default is p.empty and p.name not in kwargs]
    if missing:
        raise PluginError(f"config key '{key}': {path} needs argument '{missing[0]}'; give "
                          f"it in {key}")
