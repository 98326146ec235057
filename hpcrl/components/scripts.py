"""A user's script as the home of components, without ever running its training twice.

A class defined in the script being run (``python myapi.py``, every rank of ``mpiexec -n 2
python myapi.py``) lives in the module ``__main__``; hpcrl records it as ``myapi:Name`` (the
script's module name: its stem, or the ``-m`` name), the form every other process can import.
Importing ``myapi`` would run the script's top level once more, and with it any training
that is not under ``if __name__ == "__main__":``. So the rule is:

1. In the process that runs the script, on each MPI rank that runs it, and in the env
   subprocesses forked from it (``env.vectorization=async``), ``myapi:Name`` is
   ``__main__``'s ``Name``: the script is never imported a second time (:func:`main_module`).
   A subprocess that is spawned instead (macOS, Python 3.14's forkserver) gets its
   ``__main__`` from multiprocessing, which runs the script's top level itself under the
   name ``__mp_main__``: there too the guard is what keeps the training from running.
2. In any other process (a later ``hpcrl eval``, ``hpcrl.load_policy`` from another script,
   a resume), a component's module is imported only if its file's top level does not train:
   before importing, :func:`training_call` reads the file with :mod:`ast` and finds a call of
   ``hpcrl.train`` or ``hpcrl.resume`` (under whatever name the file imported them), made
   directly or through a function of the file, outside ``if __name__ == "__main__":``; such
   a module is refused with the fix, and nothing of it runs. Training reached in ways the file
   does not show (a helper of another module, ``exec``) is stopped when it starts: while a
   component's module is being imported (:func:`importing`), ``hpcrl.train`` and
   ``hpcrl.resume`` raise :class:`TrainingDuringImport` before any run directory exists
   (:func:`refuse_training_during_import`).

The fix is always one of two: put the script's training under ``if __name__ == "__main__":``
(the guard that keeps an import from running it), or move the classes to a module file of
their own that the script imports.
"""
from __future__ import annotations

import ast
import importlib.util
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import TypeGuard

from hpcrl.errors import ExplainedError

ENTRY_POINTS = ("train", "resume")  # the functions of hpcrl and hpcrl.api that start a run
GUARD = 'if __name__ == "__main__":'
FIX = (f"put the script's training under `{GUARD}`, or move the classes to a module file of "
       f"their own that the script imports")


class TrainingDuringImport(ExplainedError):
    """hpcrl.train or hpcrl.resume was called while hpcrl imported a component's module."""

    def __init__(self, module: str, entry: str) -> None:
        super().__init__(f"hpcrl.{entry} was called while importing module '{module}' to find "
                         f"a component; {FIX}")
        self.module, self.entry = module, entry


_IMPORTING: list[str] = []  # the component modules this process is importing, innermost last


def main_module_name() -> str | None:
    """The name other processes import the running script by: its ``-m`` name, else its
    file's stem; None in an interactive session (no file)."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name not in ("__main__", "__mp_main__"):
        return spec.name
    script = getattr(main, "__file__", None)
    return None if script is None else Path(script).stem


def main_module(name: str) -> ModuleType | None:
    """``__main__``, when ``name`` is the running script's module name and no module of that
    name has been imported besides: the script, which must not be imported (run) again."""
    if name in sys.modules or name != main_module_name():
        return None
    return sys.modules["__main__"]


@contextmanager
def importing(module: str) -> Iterator[None]:
    """Mark ``module`` as being imported to find a component, for the duration of the block."""
    _IMPORTING.append(module)
    try:
        yield
    finally:
        _IMPORTING.pop()


def refuse_training_during_import(entry: str) -> None:
    """Raise :class:`TrainingDuringImport` when a component's module is being imported:
    ``hpcrl.<entry>`` is being called from its top level."""
    if _IMPORTING:
        raise TrainingDuringImport(_IMPORTING[-1], entry)


def source_file(module: str) -> Path | None:
    """The Python source file that importing ``module`` would run, found without running it
    (its parent packages are imported); None when there is none to read (not found, a
    compiled or namespace module): the import itself then says what is wrong."""
    try:
        spec = importlib.util.find_spec(module)
    except Exception:  # a parent package that fails to import, a malformed name
        return None
    origin = getattr(spec, "origin", None)
    if spec is None or not spec.has_location or not origin or not origin.endswith(".py"):
        return None
    return Path(origin)


def training_call(path: Path) -> tuple[int, str] | None:
    """Where importing the file at ``path`` would train: the line of the first statement run
    at import (outside ``if __name__ == "__main__":``) that calls ``hpcrl.train`` or
    ``hpcrl.resume``, directly or through functions of the file, and what it calls; None when
    none does (or the file cannot be read or parsed: the import reports that)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return None
    calls = _CallFinder(tree)
    trains = calls.training_functions()
    for stmt in tree.body:
        for node in _run_at_import(stmt):
            name = calls.called(node)
            if name is not None and (name.startswith("hpcrl.") or name in trains):
                what = name if name.startswith("hpcrl.") else f"{name}(), which calls " \
                                                               f"{trains[name]}"
                assert isinstance(node, ast.expr)  # called() names calls alone
                return node.lineno, what
    return None


def _is_guard(node: ast.AST) -> TypeGuard[ast.If]:
    """``node`` is ``if __name__ == "__main__":`` (either side of the ``==``)."""
    if not (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
            and len(node.test.ops) == 1 and isinstance(node.test.ops[0], ast.Eq)):
        return False
    sides = [node.test.left, node.test.comparators[0]]
    return (any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides)
            and any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides))


def _run_at_import(node: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a top-level statement that run when the module is imported: not the
    bodies of functions and lambdas (their decorators and defaults do run), nor the body of
    an ``if __name__ == "__main__":`` (its ``else`` does)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        for part in (*node.decorator_list, *node.args.defaults,
                     *(d for d in node.args.kw_defaults if d is not None)):
            yield from _run_at_import(part)
        return
    if isinstance(node, ast.Lambda):
        return
    yield node
    children = node.orelse if _is_guard(node) else ast.iter_child_nodes(node)
    for child in children:
        yield from _run_at_import(child)


class _CallFinder:
    """The names a module binds to hpcrl's training entry points, and its calls by them."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.modules: dict[str, str] = {}    # local name -> 'hpcrl' or 'hpcrl.api'
        self.functions: dict[str, str] = {}  # local name -> 'hpcrl.train' / 'hpcrl.resume'
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname is None and alias.name.split(".")[0] == "hpcrl":
                        self.modules["hpcrl"] = "hpcrl"  # import hpcrl.x binds hpcrl
                    elif alias.name in ("hpcrl", "hpcrl.api"):
                        self.modules[str(alias.asname)] = alias.name
            elif isinstance(node, ast.ImportFrom) and node.module in ("hpcrl", "hpcrl.api"):
                for alias in node.names:
                    if alias.name in ENTRY_POINTS:
                        self.functions[alias.asname or alias.name] = f"hpcrl.{alias.name}"
                    elif alias.name == "api":
                        self.modules[alias.asname or "api"] = "hpcrl.api"

    def called(self, node: ast.AST) -> str | None:
        """What the call ``node`` calls: ``hpcrl.train`` / ``hpcrl.resume`` when it is one of
        them, the bare name of any other function called by name, None otherwise."""
        if not isinstance(node, ast.Call):
            return None
        func = node.func
        if isinstance(func, ast.Name):
            return self.functions.get(func.id, func.id)
        if isinstance(func, ast.Attribute) and func.attr in ENTRY_POINTS:
            owner = _dotted(func.value)
            if owner is not None:
                head, _, rest = owner.partition(".")
                module = self.modules.get(head)
                full = module if not rest else f"{module}.{rest}"
                if module is not None and full in ("hpcrl", "hpcrl.api"):
                    return f"hpcrl.{func.attr}"
        return None

    def training_functions(self) -> dict[str, str]:
        """The module's top-level functions that call hpcrl.train or hpcrl.resume, directly or
        through each other, each with the entry point it reaches."""
        bodies = {n.name: n for n in self.tree.body
                  if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        trains: dict[str, str] = {}
        changed = True
        while changed:
            changed = False
            for name, fn in bodies.items():
                if name in trains:
                    continue
                for node in ast.walk(fn):
                    called = self.called(node)
                    reached = called if called and called.startswith("hpcrl.") \
                        else trains.get(called or "")
                    if reached:
                        trains[name], changed = reached, True
                        break
        return trains


def _dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a chain of attribute lookups on a name; None for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        owner = _dotted(node.value)
        return None if owner is None else f"{owner}.{node.attr}"
    return None
