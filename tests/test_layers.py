"""The package's layers: no import cycle between hpcrl's subpackages nor between its modules,
with or without the imports under ``if TYPE_CHECKING:``. At the bottom, the config's data
(``sections``: ``Config`` and its section dataclasses) imports nothing of hpcrl but
:mod:`hpcrl.field_docs`. The components (``envs``, ``models``, ``buffers``, ``algorithms``
and ``numerics``, formerly ``core``) name the sections they read and import nothing of the
configuration's loader and checks (``config``) nor of the run-time layer (``runtime``: run
directories, checkpoints, signals) nor of what is built on them, not even in annotations;
``scheme`` (the rank table) imports nothing of ``config`` either, and the top layers
(``experiments``: sweeps, runs, plots, videos; ``cli``: the commands) are imported by
nothing below them, the commands by nothing at all.

Read from the source, every import counted: those at a module's top level and those inside
functions alike (an import inside a function is an edge of the graph all the same: it only
runs later). Importing ``a.b.c`` from outside ``a.b`` runs the packages ``a.b``'s and
``a``'s ``__init__`` first, so the edge goes to them too (the root ``hpcrl`` excepted: its
``__init__`` imports nothing when it loads, :func:`test_importing_hpcrl_loads_nothing`).
Exempt: imports under ``if TYPE_CHECKING:`` (annotations, which never run). So a new cycle
fails here, naming the imports that close it, before it fails as a half-initialised module
somewhere, and no import inside a function can hide one. Counted with them
(:func:`test_no_type_checking_import_closes_a_circle_between_subpackages`), the types'
dependencies draw no circle either: a circle there says that the packages depend on each
other even where the run-time imports hide it.

An import inside a function is allowed only where :data:`LAZY` gives the reason, and the
reason is cost, never a cycle: an optional or heavy package (an env suite, MPI, plotting),
or keeping a light entry point light (``import hpcrl``, ``hpcrl --help``, the config's
data).

The config's data and its loader (why they are two packages, one below core and one above
it): a config's checks need the algorithms' declared capabilities (an off-policy algorithm
refuses a recurrent actor, a preset needs a replay agent) and the scheme's topology (the
envs of one update), and the loader needs the algorithms' declared sections and defaults,
while every layer names the sections it reads. So the data (``hpcrl.sections``: the
dataclasses, each built-in algorithm's own section among them, in
``sections/algorithm_keys.py``, which each algorithm's folder re-exports) sits below core,
and the loader and checks (``hpcrl.config``: ``loader.py``, ``validate*.py``,
``checks.py``, ``algo_defaults.py``, ``algo_sections.py``), the layer that turns files into
a validated ``Config``, sit above core and the scheme and import them like any layer above
them; ``hpcrl.config`` re-exports the data's main names (``from hpcrl.config import
Config, load_config``). The lookups on an algorithm's class live in core
(``hpcrl.algorithms``: ``algorithm_kind``, ``algorithm_capabilities``; ``own_section``
beside them), never on the data (the former ``AlgoConfig.kind``, ``.own`` and
``.capabilities`` properties made config and core import each other). Core registering its
capabilities into a neutral module was another way out, and refused: a lookup that works
only after something else imported core is a dependency the imports no longer show; so was
core naming what it reads through protocols of its own, a second copy of every section's
fields. Two lazy edges are left, both for cost: the loader imports its checks when it
checks, and it asks core's registry for the algorithms' declarations (sections, defaults)
when it loads a config, so that importing the config's data and its loader
(``hpcrl.sections``: every layer's annotations; ``hpcrl.config``: ``hpcrl runs``,
``hpcrl --help``) loads no torch or gymnasium (:func:`test_loading_config_data_loads_no_torch`).

Narrow arguments: the files outside ``config/`` that read deep config paths
(``config.env.num_envs``) are counted, and their number may only fall
(:data:`DEEP_CONFIG_READERS`). No function of the package is longer than
:data:`MAX_FUNCTION_LINES` lines, from its ``def`` to its last line (issue 52). The
modules that name the whole job of a rank (``RankJob``: imported at run time or for
annotations) are counted, and their number may only fall (:data:`RANKJOB_USERS`): a role
takes explicit arguments or a protocol of the parts it reads, declared where it is used,
and no function outside the job's assembly takes the job untyped (``job: Any``), which
would hand it the whole job all the same (:data:`UNTYPED_JOB_TAKERS`).
"""
from __future__ import annotations

import ast
import subprocess
import sys
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).parents[1] / "hpcrl"
# the config's data, below every layer: what it may import of hpcrl (the documented field)
DATA = "sections"
DATA_IMPORTS = ("hpcrl.field_docs",)
# the components (envs, models, buffers, algorithms and the numerics below them, formerly
# core): what they may not import, the layers above them
CORE = ("envs", "models", "buffers", "algorithms", "numerics")
ABOVE_CORE = ("config", "runtime", "placement", "learning", "collection", "exchange", "scheme",
              "slurm", "comm", "population", "experiments", "cli")
# the top layers, and the subpackages below them that may import neither
TOP = ("experiments", "cli")
BELOW_TOP = (*CORE, "comm", "collection", "exchange", "learning", "placement", "runtime", "scheme",
             "config", "population", DATA)
# what the learner (its loop, replay rule and records) may not import: a transport
TRANSPORTS = ("hpcrl.placement", "hpcrl.comm._mpi", "mpi4py")
# the sections of a Config, and how many files outside config/ read a deep config path
# (``config.env.num_envs``: two hops or more from a Config): a ceiling that only goes down.
# Issue 44's goal, reached: the 8 that assemble a run from its Config (api.py, build.py,
# cli/__init__.py, algorithms/registry.py, scheme/plan.py, slurm/render.py,
# placement/job_run.py, placement/job.py); roles and components take their section, the
# spaces and their counts
CONFIG_SECTIONS = ("env", "actor", "algo", "train", "replay", "rnd", "scheme")
DEEP_CONFIG_READERS = 8
# the files that may take a whole Config as a parameter or hold one as an attribute: the
# config's own package and the assemblers, which cut it into the sections, spaces and counts
# every other file takes (issue 52). A path ending in "/" names a folder, in "*" a prefix.
CONFIG_ASSEMBLERS: dict[str, str] = {
    "config/": "the config's own package: it loads, checks and writes Configs",
    "api.py": "the Python API: a run from its config",
    "build.py": "builds the envs, actor and layouts of a run from its config",
    "cli/": "the commands: a config from files and --set, handed to what they run",
    "placement/job.py": "the job's assembly: each rank's parts from the config",
    "placement/job_run.py": "the job's assembly: a run of the job from its config",
    "slurm/render*": "renders a batch script from the config's sized job",
    "scheme/plan.py": "`hpcrl plan`: the rank table and summary of a whole config",
    "placement/league_job.py": ("a league job's assembly: each policy's run from the job's "
                                "config, on its share of the ranks"),
    "placement/serial_run.py": ("an assembler in all but name: the serial Trainer starts a "
                                "run from its config (job_run's prepare) and resumes one "
                                "from the config in its run directory"),
    "population/member_run.py": ("a population member's run from the population's config: "
                                 "its seed and drawn values, checked, handed to the job's "
                                 "assembly (placement/job_run.py's prepare)"),
    "algorithms/registry.py": ("the one place an algorithm's part of the config is cut out of "
                               "the whole (algorithm_settings): algo.name picks the class "
                               "whose own section is cut, so make_policy and make_algorithm "
                               "take the Config and cut it once, here"),
}
# how many modules of the package, besides the one that defines it (placement/job.py), name
# the whole job of a rank (RankJob: imported, at run time or for annotations): a ceiling
# that only goes down (issue 52). Left: placement/job_run.py, the job's assembly, which
# builds the job and hands each role the parts its protocol declares
RANKJOB_USERS = 1
RANKJOB_HOME = "placement/job.py"
# the files that may take a job untyped (a parameter ``job: Any``, or ``job`` without an
# annotation), which would hand them the whole RankJob all the same -> why
UNTYPED_JOB_TAKERS = {
    "placement/job.py": "the job's assembly: it builds the job",
    "placement/job_run.py": "the job's assembly: it hands each role its job",
    "algorithms/family.py": ("the plug-in interface (FamilyWiring): a family's wiring reads "
                             "what it declares of the job; the built-in ones declare their "
                             "protocols, checked against RankJob in placement/job.py"),
}
# the longest a function of the package may be, from its ``def`` line to its last line
# (decorators aside); a longer one is split into named steps
MAX_FUNCTION_LINES = 60
# module basenames that more than one module of the package has (``__init__`` and
# ``__main__`` aside): each a name shared by ideas a reader must tell apart by their folder,
# so at most this many (issue 52); the two left name the same idea at different layers:
# a registry (algorithms', envs') and a sweep (the command, its expansion, its job array)
MAX_REPEATED_BASENAMES = 3

# why an import may sit inside a function: (importing module or its package, "*" for any;
# imported module or its package) -> the reason. Cost only, never to dodge a cycle (the
# graph counts these imports too, so a cycle they close fails all the same).
ENTRY_POINT = ("an entry point imports what it runs when it runs, so that `import hpcrl`, "
               "`hpcrl --help` and the light commands load no torch, MPI or plotting")
CONFIG_DATA = ("config's loader imports its checks (core's algorithms, the scheme's "
               "topology, torch and gymnasium with them) when it checks a config, so that "
               "importing the loader (hpcrl.config: `hpcrl --help`, `hpcrl runs`) stays light")
LIGHT_ALGORITHMS = ("hpcrl.algorithms' package imports its names (the registry, torch with it) "
                    "when one is first asked, so that importing the package or a built-in's "
                    "folder (`from hpcrl.algorithms.dqn import DqnConfig`) stays light")
DECLARED = ("the algorithms' declarations (their sections, defaults and rules, on their "
            "classes: core's registry, torch with it) are asked when a config is loaded, so "
            "that importing the loader (hpcrl.config) stays light")
MULTI_RANK = ("what only a job of several ranks needs (spares, the watch for lost ranks) is "
              "imported by such a job: a run of one process loads nothing of placement/mpi")
OPTIONAL = "an optional package (an extra), imported by the feature that needs it"
LIGHT_SCHEME = ("the scheme's topology (what config's checks and `hpcrl plan` read) stays light: "
                "comm's package loads torch; asked only when lz4 is configured")
DISTRIBUTED = ("torch.distributed is slow to import: only the all-reduce and the rendezvous "
               "that use it import it, when they run")
MPI_INIT = ("importing mpi4py initialises MPI: only a rank of a job, or a process that asks "
            "the library, imports it")
LAZY: dict[tuple[str, str], str] = {
    ("hpcrl", "hpcrl"): ENTRY_POINT,  # hpcrl/__init__.py: load_policy
    ("hpcrl.api", "hpcrl"): ENTRY_POINT,
    ("hpcrl.cli", "hpcrl"): ENTRY_POINT,
    ("hpcrl.config.loader", "hpcrl.config.validate"): CONFIG_DATA,
    ("hpcrl.placement.job_run", "hpcrl.placement.mpi"): MULTI_RANK,
    ("hpcrl.config.algo_defaults", "hpcrl.algorithms"): DECLARED,
    ("hpcrl.algorithms", "hpcrl.algorithms.registry"): LIGHT_ALGORITHMS,
    ("hpcrl.scheme.topology", "hpcrl.comm.compression"): LIGHT_SCHEME,
    ("hpcrl.comm._mpi", "mpi4py"): MPI_INIT,
    ("hpcrl.comm.allreduce", "torch.distributed"): DISTRIBUTED,
    ("hpcrl.comm.rendezvous", "torch.distributed"): DISTRIBUTED,
    ("*", "lz4"): OPTIONAL,
    ("*", "cv2"): OPTIONAL,
    ("*", "mujoco"): OPTIONAL,
    ("*", "ale_py"): OPTIONAL,
    ("*", "crafter"): OPTIONAL,
    ("*", "dm_control"): OPTIONAL,
    ("*", "shimmy"): OPTIONAL,
    ("*", "openskill"): OPTIONAL,
    ("*", "pettingzoo"): OPTIONAL,
    ("*", "minatar"): OPTIONAL,
    ("*", "minigrid"): OPTIONAL,
    ("*", "pybullet"): OPTIONAL,
    ("*", "pybullet_envs_gymnasium"): OPTIONAL,
    ("*", "vizdoom"): OPTIONAL,
    ("*", "envpool"): OPTIONAL,
    ("*", "matplotlib"): OPTIONAL,
    ("*", "imageio"): OPTIONAL,
    ("*", "imageio_ffmpeg"): OPTIONAL,
    ("*", "wandb"): OPTIONAL,
    ("*", "torch.utils.tensorboard"): OPTIONAL,
}

# the packages whose ``__init__`` alone a LAZY entry naming them as importer covers (their
# modules import at the top like any other)
LAZY_INITS = ("hpcrl", "hpcrl.algorithms")


@dataclass(frozen=True)
class Import:
    """One import statement's module: who imports it, where, and whether at the top level."""

    module: str  # the importing module
    name: str  # the module it imports
    line: int
    top: bool  # at the module's top level (else inside a function or class)


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(
        ".__init__")


def _is_module(name: str) -> bool:
    """Whether ``name`` is a module or package of hpcrl's source."""
    path = PACKAGE.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _type_checking_nodes(tree: ast.Module) -> set[int]:
    """The nodes under ``if TYPE_CHECKING:`` (exempt: annotations only)."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            inside.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return inside


def _names(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """The modules an import statement loads (``from a import b`` loads ``a.b`` where that is
    a module of hpcrl's source; a relative import is resolved)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        parts = module.split(".")[: len(module.split(".")) - node.level + is_package]
        base = ".".join(parts + ([base] if base else []))
    subs = [f"{base}.{alias.name}" for alias in node.names
            if base.startswith("hpcrl") and _is_module(f"{base}.{alias.name}")]
    return [base, *subs]


@cache
def all_imports(annotations: bool = False) -> tuple[Import, ...]:
    """Every import of hpcrl's source, ``TYPE_CHECKING`` blocks left out unless
    ``annotations`` (then they count as top-level imports: what the types depend on)."""
    found: list[Import] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        tree = ast.parse(path.read_text())
        exempt = set() if annotations else _type_checking_nodes(tree)
        top = {id(n) for n in tree.body} | (_type_checking_nodes(tree) if annotations else set())
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom) or id(node) in exempt:
                continue
            for name in _names(node, module, path.name == "__init__.py"):
                found.append(Import(module, name, node.lineno, id(node) in top))
    return tuple(found)


def _loaded(importer: str, name: str) -> Iterator[str]:
    """What importing ``name`` from ``importer`` runs: ``name`` and every package above it
    that does not hold ``importer`` (the root ``hpcrl`` left out: it loads nothing)."""
    parts = name.split(".")
    for end in range(2, len(parts) + 1):
        package = ".".join(parts[:end])
        if end == len(parts) or not (importer + ".").startswith(package + "."):
            yield package


def _unit(module: str) -> str:
    """The subpackage a module belongs to (a top-level module is a unit of its own)."""
    parts = module.split(".")
    if len(parts) > 1 and (PACKAGE / parts[1]).is_dir():
        return parts[1]
    return module


def _module(module: str) -> str:
    """A module as its own unit."""
    return module


def import_edges(unit: Callable[[str], str] = _unit, annotations: bool = False
                 ) -> dict[tuple[str, str], str]:
    """(unit, unit it imports) -> one import that makes the edge, as 'module:line -> module';
    ``unit`` names the unit a module belongs to (its subpackage, or the module itself);
    ``annotations``: the imports under ``if TYPE_CHECKING:`` count too."""
    edges: dict[tuple[str, str], str] = {}
    for imp in all_imports(annotations):
        if imp.name.split(".")[0] != "hpcrl" or imp.name == "hpcrl":
            continue
        for loaded in _loaded(imp.module, imp.name):
            a, b = unit(imp.module), unit(loaded)
            if a != b:
                edges.setdefault((a, b), f"{imp.module}:{imp.line} -> {imp.name}")
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
        for w in sorted(graph[v]):
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


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _covers(entry: tuple[str, str], imp: Import) -> bool:
    """Whether the :data:`LAZY` entry names ``imp``: a package of :data:`LAZY_INITS` as
    importer is its ``__init__`` alone, ``*`` any module."""
    importer, imported = entry
    by = (importer == "*" or imp.module == importer
          or (importer not in LAZY_INITS and _within(imp.module, importer)))
    return by and _within(imp.name, imported)


def lazy_reason(imp: Import) -> str | None:
    """Why ``imp``, an import inside a function, may stay there (None: it may not)."""
    return next((reason for entry, reason in LAZY.items() if _covers(entry, imp)), None)


def test_no_import_cycle_between_subpackages():
    edges = import_edges()
    found = cycles(edges)
    closing = [edges[(a, b)] for group in found for a in group for b in group
               if (a, b) in edges]
    assert not found, f"import cycles between {found}: {closing}"


def test_no_type_checking_import_closes_a_circle_between_subpackages():
    # the types' dependencies, TYPE_CHECKING imports counted: a circle they close says the
    # packages depend on each other even where the run-time imports hide it (issue 52).
    # Fix one by moving the type to the lower package (the config's sections, which broke
    # algorithms -> config -> algorithms: hpcrl/sections/), or by a Protocol where it is
    # used (exchange's ExchangeJob, which broke exchange -> placement -> exchange)
    edges = import_edges(annotations=True)
    found = cycles(edges)
    closing = [edges[(a, b)] for group in found for a in group for b in group
               if (a, b) in edges and (a, b) not in import_edges()]
    assert not found, f"circles closed by TYPE_CHECKING imports {found}: {closing}"


def test_the_config_data_imports_nothing_above_it():
    # the sections are the bottom layer: every layer names them, annotations included, so
    # they import nothing of hpcrl but the documented field (not even in annotations)
    found = [why for (a, b), why in import_edges(annotations=True).items()
             if a == DATA and b not in DATA_IMPORTS]
    assert not found, found


def test_no_import_cycle_between_modules():
    # finer than the subpackages: a cycle inside one (the sections' schema and the
    # algorithms' keys, comm's package and its channel) fails here
    edges = import_edges(_module)
    found = cycles(edges)
    closing = [edges[(a, b)] for group in found for a in group for b in group
               if (a, b) in edges]
    assert not found, f"import cycles between {found}: {closing}"


def test_every_import_inside_a_function_has_a_reason():
    # stdlib modules cost nothing to import: they belong at the top as well
    unexplained = [f"{imp.module}:{imp.line} imports {imp.name}" for imp in all_imports()
                   if not imp.top and lazy_reason(imp) is None]
    assert not unexplained, ("imports inside functions with no reason in LAZY (move them to "
                             "the top; a cycle they would close is a layering to mend): "
                             f"{unexplained}")


def test_every_reason_is_still_used():
    used = {entry for imp in all_imports() if not imp.top for entry in LAZY
            if _covers(entry, imp)}
    assert set(LAZY) == used, f"LAZY entries no import needs: {set(LAZY) - used}"


def test_importing_hpcrl_loads_nothing():
    # why the graph leaves the root package out of what importing hpcrl.x runs
    assert not [imp for imp in all_imports() if imp.module == "hpcrl" and imp.top
                and imp.name.startswith("hpcrl.")]


def test_the_learner_imports_no_transport():
    # the learner loop, the replay rule and the writer run the same in one process and on
    # MPI ranks
    found = [f"{imp.module}: {imp.name}" for imp in all_imports()
             if imp.module.startswith("hpcrl.learning") and imp.name.startswith(TRANSPORTS)]
    assert not found, found


def test_core_imports_nothing_of_the_layers_above_it():
    # annotations included: core names the config's sections (below it), not the config
    edges = import_edges(annotations=True)
    upward = [why for (a, b), why in edges.items() if a in CORE and b in ABOVE_CORE]
    assert not upward, upward


def test_the_scheme_imports_no_config():
    # the config's checks read the scheme's topology: the scheme names the config's sections
    # (below both), never the loader, not even in annotations
    edges = import_edges(annotations=True)
    assert ("scheme", "config") not in edges, edges.get(("scheme", "config"))


def probe_output(probe: str) -> str:
    """What ``probe``, Python source, prints when a fresh interpreter runs it from the
    repository's root (so that the modules it finds loaded are the ones it imported)."""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120, cwd=PACKAGE.parent)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_loading_config_data_loads_no_torch():
    # the reasons CONFIG_DATA, DECLARED and LIGHT_ALGORITHMS give, as the interpreter sees
    # it: the config's data, its loader, a built-in's folder (its keys) and the algorithms'
    # light package may load, the algorithms' classes may not
    probe = ("import sys, hpcrl.sections.schema, hpcrl.config, hpcrl.algorithms.ppo, "
             "hpcrl.scheme.topology, hpcrl.runtime.run_dir\n"
             "print(sorted(m for m in ('torch', 'gymnasium', 'hpcrl.algorithms.registry') "
             "if m in sys.modules))")
    out = probe_output(probe)
    assert out.strip() == "[]", out


def test_the_algorithms_package_names_load_when_asked():
    # LIGHT_ALGORITHMS: importing the package loads no class; each public name of it and of
    # hpcrl resolves on first use
    probe = ("import sys, hpcrl, hpcrl.algorithms as a\n"
             "light = 'torch' not in sys.modules\n"
             "missing = [n for n in (*a.__all__, *hpcrl.__all__) if getattr(a if n in a.__all__ "
             "else hpcrl, n) is None]\n"
             "print(light, missing, hpcrl.DQN is a.DQN, a.PPO is a.ALGORITHMS['ppo'])")
    out = probe_output(probe)
    assert out.split() == ["True", "[]", "True", "True"], out


def test_importing_all_of_core_loads_no_layer_above_it():
    # what the source check above says, as the interpreter sees it
    probe = ("import importlib, pkgutil, sys\n"
             f"for name in {CORE}:\n"
             "    package = importlib.import_module('hpcrl.' + name)\n"
             "    prefix = package.__name__ + '.'\n"
             "    for m in pkgutil.walk_packages(package.__path__, prefix):\n"
             "        importlib.import_module(m.name)\n"
             "print(' '.join(sorted({n.split('.')[1] for n in sys.modules\n"
             "                       if n.startswith('hpcrl.') and n.count('.') >= 1})))")
    out = probe_output(probe)
    loaded = set(out.split())
    assert set(CORE) <= loaded and not loaded & set(ABOVE_CORE), loaded


def test_nothing_below_the_top_layers_imports_them():
    edges = import_edges()
    upward = [why for (a, b), why in edges.items() if a in BELOW_TOP and b in TOP]
    assert not upward, upward


def test_nothing_imports_the_commands():
    edges = import_edges()
    into_cli = [why for (a, b), why in edges.items() if b == "cli"]
    assert not into_cli, into_cli


def is_deep_config_read(node: ast.AST) -> bool:
    """Whether ``node`` reads an attribute of a config section reached from a Config
    (``config.env.num_envs``, ``cfg.algo.name``, ``self.config.scheme.preset``,
    ``job.config.train.device``; not ``config.scheme`` alone)."""
    section = node.value if isinstance(node, ast.Attribute) else None
    if not (isinstance(section, ast.Attribute) and section.attr in CONFIG_SECTIONS):
        return False
    root = section.value
    return ((isinstance(root, ast.Name) and root.id in ("config", "cfg"))
            or (isinstance(root, ast.Attribute) and root.attr == "config"))


def deep_config_reads() -> dict[str, int]:
    """Files outside ``config/`` -> how many deep config paths they read."""
    found: dict[str, int] = defaultdict(int)
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if not relative.startswith("config/"):
            for node in ast.walk(ast.parse(path.read_text())):
                found[relative] += is_deep_config_read(node)
    return {file: n for file, n in found.items() if n}


def test_fewer_files_read_deep_config_paths():
    # lower DEEP_CONFIG_READERS when this number falls; never raise it: pass a role its
    # section (config.scheme), the spaces or a count instead of the Config
    readers = deep_config_reads()
    assert len(readers) <= DEEP_CONFIG_READERS, (
        f"{len(readers)} files outside config/ read deep config paths (at most "
        f"{DEEP_CONFIG_READERS}): pass the section or the count instead: {sorted(readers)}")


def test_the_deep_read_count_sees_the_forms_it_names():
    tree = ast.parse("config.env.num_envs\ncfg.algo.name\nself.config.scheme.preset\n"
                     "job.config.train.device\nconfig.scheme\nscheme.preset\nconfig.seed\n")
    assert sum(map(is_deep_config_read, ast.walk(tree))) == 4


def names_rankjob(tree: ast.Module) -> bool:
    """Whether the module ``tree`` names ``RankJob``: imports it (at its top, in a function
    or under ``TYPE_CHECKING``) or reaches it as an attribute (``job.RankJob``)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(a.name == "RankJob" for a in node.names):
            return True
        if isinstance(node, ast.Attribute) and node.attr == "RankJob":
            return True
    return False


def rankjob_users() -> list[str]:
    """The modules of the package (its home aside) that name ``RankJob``."""
    return [relative for path in sorted(PACKAGE.rglob("*.py"))
            if (relative := path.relative_to(PACKAGE).as_posix()) != RANKJOB_HOME
            and names_rankjob(ast.parse(path.read_text()))]


def test_fewer_modules_take_the_whole_job():
    # lower RANKJOB_USERS when this number falls; never raise it: give a role explicit
    # arguments (a channel, a rank, a section, counts) or a protocol of the parts it reads
    users = rankjob_users()
    assert len(users) <= RANKJOB_USERS, (
        f"{len(users)} modules name RankJob (at most {RANKJOB_USERS}): pass the parts the role "
        f"reads (arguments, or a protocol declared where it is used): {users}")


def untyped_job_parameters(tree: ast.Module) -> list[str]:
    """The functions of ``tree`` with a parameter ``job`` that is unannotated or ``Any``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for arg in node.args.args + node.args.kwonlyargs:
                if arg.arg == "job" and (arg.annotation is None or (
                        isinstance(arg.annotation, ast.Name) and arg.annotation.id == "Any")):
                    found.append(node.name)
    return found


def test_no_role_takes_the_job_untyped():
    # a role declares what it reads of the job (a protocol) instead of taking it as Any
    takers = {relative: names for path in sorted(PACKAGE.rglob("*.py"))
              if (relative := path.relative_to(PACKAGE).as_posix()) not in UNTYPED_JOB_TAKERS
              and (names := untyped_job_parameters(ast.parse(path.read_text())))}
    assert not takers, f"functions that take the job untyped (declare a protocol): {takers}"
    for relative in UNTYPED_JOB_TAKERS:
        assert (PACKAGE / relative).exists(), f"{relative} is gone: drop it from the list"


def test_the_untyped_job_check_sees_the_forms_it_names():
    tree = ast.parse("def a(job: Any): ...\ndef b(self, job): ...\ndef c(job: Job): ...\n"
                     "def d(jobs: Any): ...\n")
    assert untyped_job_parameters(tree) == ["a", "b"]


def test_the_rankjob_count_sees_the_forms_it_names():
    seen = [names_rankjob(ast.parse(text)) for text in (
        "from hpcrl.placement.job import RankJob",
        "if TYPE_CHECKING:\n    from hpcrl.placement.job import RankJob, build_job",
        "def f():\n    from .job import RankJob as J",
        "import hpcrl.placement.job as job\nx: job.RankJob",
        '"""a docstring that names RankJob"""\njob: Any = None',
    )]
    assert seen == [True, True, True, True, False]


def _is_assembler(relative: str) -> bool:
    """Whether the file ``relative`` (to hpcrl/) is one of :data:`CONFIG_ASSEMBLERS`."""
    return any(relative.startswith(name[:-1]) if name.endswith(("/", "*"))
               else relative == name for name in CONFIG_ASSEMBLERS)


def _names_config(annotation: ast.expr | None) -> bool:
    """Whether an annotation names the whole ``Config`` (``Config``, ``Config | None``,
    ``schema.Config``, ``"Config"``), not a section (``EnvConfig``)."""
    for node in ast.walk(annotation) if annotation is not None else ():
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                if _names_config(ast.parse(node.value, mode="eval").body):
                    return True
            except SyntaxError:
                continue
        if ((isinstance(node, ast.Name) and node.id == "Config")
                or (isinstance(node, ast.Attribute) and node.attr == "Config")):
            return True
    return False


def whole_config_holders(tree: ast.Module) -> list[str]:
    """``name:line`` of each parameter and attribute of ``tree`` annotated with the whole
    ``Config`` (a function's arguments, a class's fields, ``self.x: Config``)."""
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            found += [f"{arg.arg}:{arg.lineno}" for arg in
                      (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg)
                      if arg is not None and _names_config(arg.annotation)]
        elif isinstance(node, ast.AnnAssign) and _names_config(node.annotation):
            found.append(f"{ast.unparse(node.target)}:{node.lineno}")
    return sorted(found, key=lambda holder: int(holder.rsplit(":", 1)[1]))


def test_no_whole_config_outside_the_assemblers():
    # pass a role its section (config.scheme), the spaces or a count instead of the Config;
    # a file that assembles a run from the Config joins CONFIG_ASSEMBLERS, with its reason
    found = [f"{path.relative_to(PACKAGE).as_posix()}: {holder}"
             for path in sorted(PACKAGE.rglob("*.py"))
             if not _is_assembler(path.relative_to(PACKAGE).as_posix())
             for holder in whole_config_holders(ast.parse(path.read_text()))]
    assert not found, f"a whole Config outside the assemblers: {found}"


def test_the_config_check_sees_the_forms_it_names():
    tree = ast.parse("class A:\n  c: Config\n  e: EnvConfig\n"
                     "def f(a: Config | None, *, b: 'Config', e: EnvConfig) -> Config: ...\n"
                     "def g(self, s: schema.Config):\n  self.x: list[Config] = []\n")
    assert whole_config_holders(tree) == ["c:2", "a:4", "b:4", "s:5", "self.x:6"]
    assert _is_assembler("cli/runs.py") and _is_assembler("slurm/render_parts.py")
    assert not _is_assembler("slurm/sizing.py") and not _is_assembler("placement/leader.py")


def long_functions(tree: ast.Module, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """``name (N lines)`` of every function of ``tree`` longer than ``limit`` lines, methods
    and nested functions by their dotted names (``ActorCritic.__init__``)."""
    found: list[str] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                if not isinstance(child, ast.ClassDef):
                    assert child.end_lineno is not None
                    lines = child.end_lineno - child.lineno + 1
                    if lines > limit:
                        found.append(f"{name} ({lines} lines)")
                visit(child, name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def test_no_function_is_longer_than_60_lines():
    long = [f"{path.relative_to(PACKAGE).as_posix()}: {function}"
            for path in sorted(PACKAGE.rglob("*.py"))
            for function in long_functions(ast.parse(path.read_text()))]
    assert not long, (f"{len(long)} functions of hpcrl/ are longer than {MAX_FUNCTION_LINES} "
                      f"lines; split each into named steps: {long}")


def test_the_length_check_sees_methods_and_nested_functions():
    step = "x = 0\n"
    tree = ast.parse("class A:\n  def f(self):\n" + 3 * ("    " + step) + "    def g():\n"
                     + 3 * ("      " + step) + "\nasync def h():\n" + 6 * ("    " + step))
    assert long_functions(tree, limit=4) == ["A.f (8 lines)", "h (7 lines)"]
    assert long_functions(tree, limit=3) == ["A.f (8 lines)", "A.f.g (4 lines)", "h (7 lines)"]


def test_the_top_layers_are_subpackages():
    assert all((PACKAGE / unit / "__init__.py").is_file() for unit in (*TOP, *BELOW_TOP))


def test_the_check_finds_a_cycle_when_there_is_one():
    edges = {("core", "runtime"): "core.x -> runtime.y", ("runtime", "core"): "runtime.y -> core.x",
             ("roles", "core"): "roles.z -> core.x"}
    assert cycles(edges) == [["core", "runtime"]]


def test_an_import_inside_a_function_makes_an_edge(tmp_path):
    # the check reads function bodies: the import below is found, not at the top level
    tree = ast.parse("def f():\n    from hpcrl.cli import main\n")
    node = tree.body[0].body[0]
    assert isinstance(node, ast.ImportFrom)
    assert _names(node, "hpcrl.models.x", False)[0] == "hpcrl.cli"
    assert any(not imp.top for imp in all_imports())
    assert list(_loaded("hpcrl.algorithms.ppo.clipped_surrogate", "hpcrl.sections.schema")) == [
        "hpcrl.sections", "hpcrl.sections.schema"]
    assert list(_loaded("hpcrl.sections.schema", "hpcrl.sections.offpolicy")) == [
        "hpcrl.sections.offpolicy"]


def repeated_basenames(package: Path = PACKAGE) -> dict[str, list[str]]:
    """Module basenames that several modules of ``package`` share -> their paths."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted(package.rglob("*.py")):
        if path.stem not in ("__init__", "__main__"):
            found[path.name].append(path.relative_to(package).as_posix())
    return {name: paths for name, paths in found.items() if len(paths) > 1}


def test_few_module_names_repeat():
    repeated = repeated_basenames()
    assert len(repeated) <= MAX_REPEATED_BASENAMES, (
        f"{len(repeated)} module basenames repeat (at most {MAX_REPEATED_BASENAMES}): name "
        f"each module for what it holds: {repeated}")


def test_the_name_check_sees_a_repeat(tmp_path):
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "registry.py").write_text("")
        (tmp_path / folder / "__init__.py").write_text("")
    assert repeated_basenames(tmp_path) == {"registry.py": ["a/registry.py", "b/registry.py"]}
