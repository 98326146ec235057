"""The package's layers: no import cycle between hpcrl's subpackages, ``core`` (the
algorithms, networks, storages and envs) imports nothing of the configuration (``config``:
it names the config sections it reads in annotations only) nor of the run-time layer
(``runtime``: run directories, checkpoints, signals) nor of what is built on them, and the
top layers (``experiments``: sweeps, runs, plots, videos; ``cli``: the commands) are
imported by nothing below them, the commands by nothing at all.

Read from the source (module-level imports, ``TYPE_CHECKING`` blocks and imports inside
functions left out: those run after every module has loaded), so a new cycle fails here,
naming the imports that close it, before it fails as a half-initialised module somewhere.
"""
from __future__ import annotations

import ast
import subprocess
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

PACKAGE = Path(__file__).parents[1] / "hpcrl"
# what core may not import: the layers above it
ABOVE_CORE = ("config", "runtime", "placement", "learning", "roles", "scheme", "slurm", "comm",
              "experiments", "cli")
# the top layers, and the subpackages below them that may import neither
TOP = ("experiments", "cli")
BELOW_TOP = ("core", "comm", "roles", "learning", "placement", "runtime", "scheme", "config")
# what the learner (its loop, replay rule and records) may not import: a transport
TRANSPORTS = ("hpcrl.placement", "hpcrl.comm._mpi", "mpi4py")


def _unit(module: str) -> str:
    """The subpackage a module belongs to (a top-level module is a unit of its own)."""
    parts = module.split(".")
    if len(parts) > 1 and (PACKAGE / parts[1]).is_dir():
        return parts[1]
    return module


def _module(module: str) -> str:
    """A module as its own unit."""
    return module


def import_edges(unit: Callable[[str], str] = _unit) -> dict[tuple[str, str], str]:
    """(unit, unit it imports) -> one import that makes the edge, as 'module -> module';
    ``unit`` names the unit a module belongs to (its subpackage, or the module itself)."""
    edges: dict[tuple[str, str], str] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        module = module.removesuffix(".__init__")
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] if node.level == 0 else []
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue  # an `if TYPE_CHECKING:` block, a function's body, ...
            for name in names:
                if name.split(".")[0] != "hpcrl" or name == "hpcrl":
                    continue
                a, b = unit(module), unit(name)
                if a != b:
                    edges.setdefault((a, b), f"{module} -> {name}")
    return edges


def cycles(edges: dict[tuple[str, str], str]) -> list[list[str]]:
    """The strongly connected groups of more than one unit (Tarjan)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for a, b in edges:
        graph[a].add(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(list(graph)):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_between_subpackages():
    edges = import_edges()
    found = cycles(edges)
    closing = [edges[(a, b)] for group in found for a in group for b in group
               if (a, b) in edges]
    assert not found, f"import cycles between {found}: {closing}"


def test_no_import_cycle_between_modules():
    # finer than the subpackages: a cycle inside one (config's schema and its sections,
    # comm's package and its channel) fails here
    edges = import_edges(_module)
    found = cycles(edges)
    closing = [edges[(a, b)] for group in found for a in group for b in group
               if (a, b) in edges]
    assert not found, f"import cycles between {found}: {closing}"


def test_the_learner_imports_no_transport():
    # every import, those inside functions included: the learner loop, the replay rule and
    # the recorder run the same in one process and on MPI ranks
    found = []
    for path in sorted((PACKAGE / "learning").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            found += [f"{path.name}: {name}" for name in names if name.startswith(TRANSPORTS)]
    assert not found, found


def test_core_imports_nothing_of_the_layers_above_it():
    edges = import_edges()
    upward = [why for (a, b), why in edges.items() if a == "core" and b in ABOVE_CORE]
    assert not upward, upward


def test_importing_all_of_core_loads_no_layer_above_it():
    # what the source check above says, as the interpreter sees it (no import inside a
    # function runs: importing a module runs only its top level)
    probe = ("import importlib, pkgutil, sys, hpcrl.core as core\n"
             "for m in pkgutil.walk_packages(core.__path__, 'hpcrl.core.'):\n"
             "    importlib.import_module(m.name)\n"
             "print(' '.join(sorted({n.split('.')[1] for n in sys.modules\n"
             "                       if n.startswith('hpcrl.') and n.count('.') >= 1})))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120, cwd=PACKAGE.parent)
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = set(done.stdout.split())
    assert "core" in loaded and not loaded & set(ABOVE_CORE), loaded


def test_nothing_below_the_top_layers_imports_them():
    edges = import_edges()
    upward = [why for (a, b), why in edges.items() if a in BELOW_TOP and b in TOP]
    assert not upward, upward


def test_nothing_imports_the_commands():
    edges = import_edges()
    into_cli = [why for (a, b), why in edges.items() if b == "cli"]
    assert not into_cli, into_cli


def test_the_top_layers_are_subpackages():
    assert all((PACKAGE / unit / "__init__.py").is_file() for unit in (*TOP, *BELOW_TOP))


def test_the_check_finds_a_cycle_when_there_is_one():
    edges = {("core", "runtime"): "core.x -> runtime.y", ("runtime", "core"): "runtime.y -> core.x",
             ("roles", "core"): "roles.z -> core.x"}
    assert cycles(edges) == [["core", "runtime"]]
