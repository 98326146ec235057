"""User components by import path: ``module:Name``, Gymnasium's syntax.

A config names a user's class where it names a component (``algo.name``, ``actor.network``,
``env.wrappers``), so the CLI, ``mpirun``/``srun`` and the Slurm templates import the same
code on every rank. This module imports those paths, checks a component's keyword arguments
against its signature, and turns a class handed over in Python back into its path (the form
configs, run directories and checkpoints keep). A class of the script being run is found in
``__main__`` rather than by importing the script again, and a module that would train when
imported is refused (:mod:`hpcrl.components.scripts` gives the rule).

Every problem is a :class:`PluginError` naming the config key, the path and the fix, raised
while the config is checked, before any rank starts work.
"""
from __future__ import annotations

import importlib
import inspect
import sys
import sysconfig
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from hpcrl.components.scripts import (
    FIX,
    TrainingDuringImport,
    importing,
    main_module,
    main_module_name,
    source_file,
    training_call,
)
from hpcrl.errors import ExplainedError

CONTRACTS = (
    "the contracts in hpcrl/components/contracts.py (docs/components.md: Writing your own "
    "components)")


class PluginError(ExplainedError, ValueError):
    """A user component that cannot be imported or does not meet its contract."""


def is_import_path(value: object) -> bool:
    """``value`` is a ``module:Name`` string (a plug-in), not a built-in's name."""
    return isinstance(value, str) and ":" in value


def load(path: str, key: str) -> Any:
    """The object at ``module:Name`` (``Name`` may be dotted), for config key ``key``.

    The running script's own module name gives the script's ``__main__`` (never imported
    again), and a module whose file would train at import is refused, not imported: the rule
    of :mod:`hpcrl.components.scripts`."""
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise PluginError(f"config key '{key}' ({path!r}): an import path is 'module:Name', "
                          f"e.g. 'mylab.nets:Encoder'")
    module = main_module(module_name) or _import(module_name, path, key)
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            what = " (the script being run)" if module is sys.modules["__main__"] else ""
            raise PluginError(f"config key '{key}' ({path!r}): module '{module_name}'{what} "
                              f"has no attribute '{attr}'")
        obj = getattr(obj, part)
    return obj


def _import(module_name: str, path: str, key: str) -> ModuleType:
    """``module_name`` imported, unless importing it would train
    (:mod:`hpcrl.components.scripts`)."""
    if module_name not in sys.modules:
        source = source_file(module_name)
        found = training_call(source) if source is not None else None
        if found is not None:
            line, call = found
            raise PluginError(f"config key '{key}' ({path!r}): hpcrl will not import module "
                              f"'{module_name}', which would train: {source} line {line} "
                              f"calls {call} at its top level; {FIX}")
    try:
        with importing(module_name):
            return importlib.import_module(module_name)
    except TrainingDuringImport as err:
        raise PluginError(f"config key '{key}' ({path!r}): importing module '{module_name}' "
                          f"started training (hpcrl.{err.entry}), which hpcrl stopped; "
                          f"{FIX}") from None
    except Exception as err:  # the user's module may fail in any way while importing
        where = ("" if module_name in sys.modules or not Path(module_name).suffix else
                 " (a module name, not a file name)")
        raise PluginError(f"config key '{key}' ({path!r}): importing module '{module_name}'"
                          f"{where} failed: {type(err).__name__}: {err}; make it importable "
                          f"on every rank (pip install -e your package, or put its directory "
                          f"on PYTHONPATH)") from None


def path_of(obj: Any) -> str:
    """The ``module:Name`` of a class or function. One defined in the script being run is
    named by the script's module name (``myapi:Name`` for ``python myapi.py``): :func:`load`
    finds it in ``__main__`` in this process, and other processes import ``myapi`` when the
    script keeps its training under ``if __name__ == "__main__":``
    (:mod:`hpcrl.components.scripts`)."""
    if isinstance(obj, str):
        return obj
    module = getattr(obj, "__module__", None)
    name = getattr(obj, "__qualname__", None)
    if module is None or name is None or "<locals>" in name:
        raise PluginError(f"{obj!r} cannot be named by an import path: define it at the top "
                          f"level of a module")
    if module == "__main__":
        script = main_module_name()
        if script is None:
            raise PluginError(f"{name} is defined in an interactive session; define it in a "
                              f"module or script so every rank can import it")
        module = script
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


def component_factory(path: str, key: str, base: type, kind: str, call: str) -> Any:
    """What config key ``key`` names at ``path``, checked before it is called: a subclass
    of ``base`` (or a function) that takes the one positional argument of ``call``, the
    way hpcrl builds it. ``kind`` says what such a component is ("a torch.nn.Module
    subclass"), for the refusal."""
    factory = load(path, key)
    if isinstance(factory, type) and not issubclass(factory, base):
        raise PluginError(f"config key '{key}' ({path}): {factory.__name__} is not {kind}, "
                          f"built as {call} ({CONTRACTS})")
    if not callable(factory):
        raise PluginError(f"config key '{key}' ({path}): it names a "
                          f"{type(factory).__name__}, not a class; it must be {kind}, built "
                          f"as {call} ({CONTRACTS})")
    check_positional(factory, 1, key, path, call)
    return factory


def check_positional(factory: Callable[..., Any], fixed: int, key: str, path: str,
                     call: str) -> None:
    """Refuse a ``factory`` that cannot take the ``fixed`` positional arguments hpcrl calls
    it with (``call`` shows the call, e.g. ``Class(env, **kwargs)``), before it is called:
    a plain class or a function of the wrong shape is named with what it must provide."""
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return  # a builtin without a readable signature: it will say so itself
    params = list(signature.parameters.values())
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return
    slots = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)
    if slots < fixed:
        name = getattr(factory, "__qualname__", path)
        raise PluginError(f"config key '{key}' ({path}): hpcrl calls it as {call}, but "
                          f"{name}{signature} takes {slots} positional argument(s) "
                          f"({CONTRACTS})")


def _library_file(filename: str) -> bool:
    """Whether ``filename`` is hpcrl's own or an installed library's (torch, gymnasium, the
    standard library), not the user's code."""
    roots = {sysconfig.get_paths()[k] for k in ("stdlib", "purelib", "platlib")}
    roots.add(str(Path(__file__).parent))
    return any(filename.startswith(root) for root in roots) or filename.startswith("<")


def failure(err: BaseException) -> str:
    """``err`` in one line for a refusal that wraps a user component's own error: its type,
    message and the place it was raised from: the deepest frame in the user's code (not in
    hpcrl or a library it called, such as torch's ``nn.Module.__init__``), else the deepest."""
    frames = traceback.extract_tb(err.__traceback__)
    own = [f for f in frames if not _library_file(f.filename)]
    pick = own or list(frames)
    where = "" if not pick else \
        f" (at {Path(pick[-1].filename).name}:{pick[-1].lineno} in {pick[-1].name})"
    return f"{type(err).__name__}: {err}{where}"
