"""Move hpcrl's modules and tests to the layout that shows the architecture (issue 44.4),
and rewrite every reference to the old paths: re-runnable on a later main.

``hpcrl/core/`` splits into ``envs/`` (env making, suites and backends), ``models/``
(networks and the policies that act with them), ``buffers/`` (rollout, V-trace, replay and
demonstration storage, and the return estimators they fill), ``algorithms/`` and
``numerics/`` (flat tensors, records, optimisers, precision, compiling, gradient guard,
moments and normalisation: the number-handling every layer above shares, which knows
nothing of RL); transport-neutral modules leave ``placement/mpi/``; clashing names get new
ones; ``tests/`` mirrors the package. The tables below say all of it:

- :data:`MODULES`: old file -> new file, for every module under ``hpcrl/core/`` and every
  other module that moves (``None``: the file goes, its package being empty);
- :data:`STAYS`: modules under ``hpcrl/placement/mpi/`` that stay (they need MPI: the
  learner ranks among them, ``KEPT``, which wire the learners of ``learning/`` to a job);
- :data:`TESTS`: old test file -> new one; :data:`TESTS_STAY`: test files and folders that
  stay (multi-rank ``tests/mpi/``, ``tests/slurm/``, ``tests/comm/``, helpers);
- :data:`RENAMES`: identifiers renamed at word boundaries (``MpiJob``).

Run from the repository root on a clean tree: ``python tools/relayout.py`` (``--check``
only reports). It fails, listing them, when a module under ``hpcrl/core/`` or
``hpcrl/placement/mpi/``, or a test file, is in no table (extend the tables, then run it
again), and when a move's target exists beside its source. It ``git mv``s what is still at
its old path, writes the new packages' ``__init__.py``, rewrites every reference (import
statements, ``from x import y`` of a module, dotted strings such as monkeypatch targets and
mkdocstrings' ``::: hpcrl...``, ``:mod:`` cross-references, file paths in docs, test paths
in the quick lane, ``Path(__file__)`` hops of moved tests), patches the layer test's tables
and sorts the imports it touched (``ruff --select I --fix``). Run twice, the second run
changes nothing and says so.
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# where references are rewritten
SCOPE = ("hpcrl", "tests", "benchmarks", "examples", "tools", "docs", "README.md",
         "mkdocs.yml", "pyproject.toml", "setup.cfg", ".ci", "slurm")
TEXT_SUFFIXES = (".py", ".md", ".yml", ".yaml", ".toml", ".cfg", ".sh", ".sbatch", ".txt", "")
THIS = "tools/relayout.py"  # its own tables hold the old paths: never rewritten

C, E, M, B, A, N = ("hpcrl/core/", "hpcrl/envs/", "hpcrl/models/", "hpcrl/buffers/",
                    "hpcrl/algorithms/", "hpcrl/numerics/")

#: old module file -> new one (None: removed, its package left empty)
MODULES: dict[str, str | None] = {
    C + "__init__.py": None,
    # envs: making envs, their suites, backends, chains, restarts and state
    C + "envs.py": E + "vector.py",
    C + "suites.py": E + "make.py",
    C + "atari.py": E + "atari.py",
    C + "vizdoom.py": E + "vizdoom.py",
    C + "old_gym.py": E + "old_gym.py",
    C + "env_registry.py": E + "registry.py",
    C + "env_groups.py": E + "groups.py",
    C + "env_noise.py": E + "noise.py",
    C + "env_restarts.py": E + "restarts.py",
    C + "env_state.py": E + "state.py",
    C + "restarting_async.py": E + "restarting_async.py",
    C + "child_signals.py": E + "child_signals.py",
    C + "obs_format.py": E + "obs_format.py",
    C + "env_backends/__init__.py": E + "backends/__init__.py",
    C + "env_backends/record.py": E + "backends/record.py",
    C + "env_backends/gymnasium.py": E + "backends/gymnasium.py",
    C + "env_backends/envpool.py": E + "backends/envpool.py",
    C + "env_suites/__init__.py": E + "suites/__init__.py",
    C + "env_suites/record.py": E + "suites/record.py",
    C + "env_suites/registry.py": E + "suites/registry.py",
    C + "env_suites/atari.py": E + "suites/atari.py",
    C + "env_suites/crafter.py": E + "suites/crafter.py",
    C + "env_suites/dmc.py": E + "suites/dmc.py",
    C + "env_suites/minatar.py": E + "suites/minatar.py",
    C + "env_suites/minigrid.py": E + "suites/minigrid.py",
    C + "env_suites/pybullet.py": E + "suites/pybullet.py",
    C + "env_suites/vizdoom.py": E + "suites/vizdoom.py",
    # models: networks, and the policies and engines that act with them
    C + "actor.py": M + "actor.py",
    C + "encoders.py": M + "encoders.py",
    C + "memory.py": M + "memory.py",
    C + "distributions.py": M + "distributions.py",
    C + "critics.py": M + "critics.py",
    C + "qnetwork.py": M + "qnetwork.py",
    C + "policies.py": M + "continuous_policies.py",  # was beside hpcrl/policy.py
    C + "target.py": M + "target.py",
    C + "rnd.py": M + "rnd.py",
    C + "mlp_kernel.py": M + "mlp_kernel.py",
    C + "acting.py": M + "acting.py",
    C + "exploration.py": M + "exploration.py",
    C + "epsilon.py": M + "epsilon.py",
    C + "model_based/__init__.py": M + "model_based/__init__.py",
    C + "model_based/acting.py": M + "model_based/acting.py",
    C + "model_based/ensemble.py": M + "model_based/ensemble.py",
    C + "model_based/planners.py": M + "model_based/planners.py",
    C + "model_based/policy.py": M + "model_based/policy.py",
    C + "model_based/rewards.py": M + "model_based/rewards.py",
    C + "model_based/world_model.py": M + "model_based/world_model.py",
    # buffers: what learners read, and the targets computed on it
    C + "rollout.py": B + "rollout.py",
    C + "storage.py": B + "rollout_storage.py",
    C + "vtrace_storage.py": B + "vtrace_storage.py",
    C + "intrinsic.py": B + "intrinsic.py",
    "hpcrl/returns.py": B + "returns.py",
    C + "demo_buffer.py": B + "demos/episodes.py",
    "hpcrl/demos.py": B + "demos/files.py",
    C + "replay/__init__.py": B + "replay/__init__.py",
    C + "replay/buffer.py": B + "replay/buffer.py",
    C + "replay/goals.py": B + "replay/goals.py",
    C + "replay/her.py": B + "replay/her.py",
    C + "replay/nstep.py": B + "replay/nstep.py",
    C + "replay/obs_store.py": B + "replay/obs_store.py",
    C + "replay/prioritized.py": B + "replay/prioritized.py",
    C + "replay/sumtree.py": B + "replay/sumtree.py",
    C + "replay/transitions.py": B + "replay/transitions.py",
    # algorithms
    C + "algorithms/__init__.py": A + "__init__.py",
    C + "algorithms/a2c.py": A + "a2c.py",
    C + "algorithms/addons.py": A + "addons.py",
    C + "algorithms/base.py": A + "base.py",
    C + "algorithms/capabilities.py": A + "capabilities.py",
    C + "algorithms/contract.py": A + "algorithm.py",  # was beside hpcrl/contracts.py
    # PPO+D's replay slots and the model-based agents' env checks read their algorithm's
    # section: algorithms, above the buffers and models they use
    C + "demo_replay.py": A + "demo_replay.py",
    C + "model_based/checks.py": A + "model_based_checks.py",
    C + "algorithms/impala.py": A + "impala.py",
    C + "algorithms/key_rules.py": A + "key_rules.py",
    C + "algorithms/own_section.py": A + "own_section.py",
    C + "algorithms/plugin.py": A + "plugin.py",
    C + "algorithms/ppo.py": A + "ppo.py",
    C + "algorithms/registry.py": A + "registry.py",
    C + "algorithms/offpolicy/__init__.py": A + "offpolicy/__init__.py",
    C + "algorithms/offpolicy/base.py": A + "offpolicy/base.py",
    C + "algorithms/offpolicy/dqn.py": A + "offpolicy/dqn.py",
    C + "algorithms/offpolicy/mpc.py": A + "offpolicy/mpc.py",
    C + "algorithms/offpolicy/mpo.py": A + "offpolicy/mpo.py",
    C + "algorithms/offpolicy/sac.py": A + "offpolicy/sac.py",
    C + "algorithms/offpolicy/td3.py": A + "offpolicy/td3.py",
    # the built-ins' own config sections: torch-free, so that the config's data can import
    # them without importing the algorithms (hpcrl/algorithms/__init__ loads torch)
    C + "algorithm_keys/__init__.py": "hpcrl/algorithm_keys/__init__.py",
    C + "algorithm_keys/dqn.py": "hpcrl/algorithm_keys/dqn.py",
    C + "algorithm_keys/impala.py": "hpcrl/algorithm_keys/impala.py",
    C + "algorithm_keys/mpc.py": "hpcrl/algorithm_keys/mpc.py",
    C + "algorithm_keys/mpo.py": "hpcrl/algorithm_keys/mpo.py",
    C + "algorithm_keys/ppo.py": "hpcrl/algorithm_keys/ppo.py",
    C + "algorithm_keys/sac.py": "hpcrl/algorithm_keys/sac.py",
    C + "algorithm_keys/td3.py": "hpcrl/algorithm_keys/td3.py",
    # the learners, knowing no transport: learning/ (the ranks that wire them to a job's
    # exchanges stay in placement/mpi/)
    "hpcrl/roles/gradient_worker.py": "hpcrl/learning/gradient_worker.py",
    "hpcrl/roles/updater.py": "hpcrl/learning/updater.py",
    "hpcrl/roles/replay_learner.py": "hpcrl/learning/replay_learner.py",
    # numerics: flat tensors, records and the arithmetic of an update, no RL in them
    C + "flat.py": N + "flat.py",
    C + "records.py": N + "records.py",
    C + "optim.py": N + "optim.py",
    C + "precision.py": N + "precision.py",
    C + "compiling.py": N + "compiling.py",
    C + "gradient_guard.py": N + "gradient_guard.py",
    C + "moments.py": N + "moments.py",
    C + "normalization.py": N + "normalization.py",
    C + "reducer.py": N + "reducer.py",
    # transport-neutral modules out of placement/mpi/ (a serial run is a one-rank job)
    "hpcrl/placement/mpi/job.py": "hpcrl/placement/job.py",
    "hpcrl/placement/mpi/leader.py": "hpcrl/placement/leader.py",
    "hpcrl/placement/mpi/collector_states.py": "hpcrl/placement/collector_states.py",
    "hpcrl/placement/mpi/reducers.py": "hpcrl/roles/info_reducers.py",
}

#: modules that keep their place, their references rewritten
KEPT = (
    "hpcrl/placement/mpi/learner_rank.py",
    "hpcrl/placement/mpi/rollout_updates.py",
    "hpcrl/placement/mpi/replay_updates.py",
    "hpcrl/placement/mpi/gradient_routes.py",
    "hpcrl/placement/mpi/updater_ranks.py",
    "hpcrl/placement/mpi/job_control.py",
    "hpcrl/placement/mpi/rollout_source.py",
    "hpcrl/placement/job_run.py",
)
#: modules of placement/mpi/ that stay: they talk MPI (ranks, messages, the launcher)
STAYS = tuple(f"hpcrl/placement/mpi/{name}.py" for name in (
    "__init__", "collector_rank", "inbox", "inference_rank", "latest_weights", "launcher",
    "lost_collectors", "node_transport", "refusals", "remote_acting", "spares", "takeovers",
    "watch")) + KEPT

#: the new packages' own modules, where no old one moves there
NEW_PACKAGES: dict[str, str] = {
    E + "__init__.py": ('"""Envs: making them (suites, preprocessing chains, the user\'s '
                        'wrappers), stepping them\nas vector envs (backends), and keeping '
                        'them alive and checkpointable. Pure Gymnasium;\nthey never know '
                        'which process they run in."""\n'),
    M + "__init__.py": ('"""Models: encoders, memory cores, heads, distributions, critics, '
                        'Q-networks and the\npolicies and engines that act with them. Pure '
                        'PyTorch (and numpy kernels)."""\n'),
    B + "__init__.py": ('"""Buffers: what learners read (rollout and V-trace storage, replay '
                        'with HER and\npriorities, demonstrations) and the return '
                        'estimators computed on it."""\n'),
    B + "demos/__init__.py": ('"""Demonstrations: the files ``hpcrl eval --record`` writes, '
                              'and the episodes\nPPO+D replays."""\n'),
    N + "__init__.py": ('"""Numerics every layer shares, with no RL in them: flat parameter '
                        'vectors and named-field\nrecords, optimisers over them, precision, '
                        'compiling, the gradient guard, moments,\nnormalisation and '
                        'cross-process sums."""\n'),
}

#: identifiers renamed at word boundaries
RENAMES: dict[str, str] = {
    "MpiJob": "RankJob",  # a serial run is a one-rank job as well
}

T = "tests/"
#: old test file -> new one (mirroring the module it tests)
TESTS: dict[str, str] = {
    T + "test_acting_slots.py": T + "exchange/test_acting_slots.py",
    T + "test_algo_defaults.py": T + "config/test_algo_defaults.py",
    T + "test_algo_sections.py": T + "config/test_algo_sections.py",
    T + "test_config.py": T + "config/test_config.py",
    T + "test_algorithm_contract.py": T + "algorithms/test_algorithm_contract.py",
    T + "test_capabilities.py": T + "algorithms/test_capabilities.py",
    T + "test_learning.py": T + "algorithms/test_learning.py",
    T + "test_mpc.py": T + "algorithms/test_mpc.py",
    T + "test_mpo.py": T + "algorithms/test_mpo.py",
    T + "test_offpolicy_algorithms.py": T + "algorithms/test_offpolicy_algorithms.py",
    T + "test_offpolicy_checkpoint.py": T + "algorithms/test_offpolicy_checkpoint.py",
    T + "test_offpolicy_learning.py": T + "algorithms/test_offpolicy_learning.py",
    T + "test_offpolicy_plugins.py": T + "algorithms/test_offpolicy_plugins.py",
    T + "test_plugin_sections.py": T + "algorithms/test_plugin_sections.py",
    T + "test_policy_addons.py": T + "algorithms/test_policy_addons.py",
    T + "test_atari.py": T + "envs/test_atari.py",
    T + "test_box2d_checkpoint.py": T + "envs/test_box2d_checkpoint.py",
    T + "test_crashing_envs.py": T + "envs/test_crashing_envs.py",
    T + "test_env_families.py": T + "envs/test_env_families.py",
    T + "test_env_groups.py": T + "envs/test_env_groups.py",
    T + "test_env_noise.py": T + "envs/test_env_noise.py",
    T + "test_env_registry.py": T + "envs/test_env_registry.py",
    T + "test_env_restarts.py": T + "envs/test_env_restarts.py",
    T + "test_env_state.py": T + "envs/test_env_state.py",
    T + "test_env_suites.py": T + "envs/test_env_suites.py",
    T + "test_envpool.py": T + "envs/test_envpool.py",
    T + "test_minatar.py": T + "envs/test_minatar.py",
    T + "test_obs_format.py": T + "envs/test_obs_format.py",
    T + "test_vizdoom.py": T + "envs/test_vizdoom.py",
    T + "test_distributions.py": T + "models/test_distributions.py",
    T + "test_encoders.py": T + "models/test_encoders.py",
    T + "test_memory.py": T + "models/test_memory.py",
    T + "test_mlp_kernel.py": T + "models/test_mlp_kernel.py",
    T + "test_mpc_planning.py": T + "models/test_mpc_planning.py",
    T + "test_rnd.py": T + "models/test_rnd.py",
    T + "test_demo_replay.py": T + "buffers/test_demo_replay.py",
    T + "test_demos.py": T + "buffers/test_demos.py",
    T + "test_her.py": T + "buffers/test_her.py",
    T + "test_her_learning.py": T + "buffers/test_her_learning.py",
    T + "test_nstep.py": T + "buffers/test_nstep.py",
    T + "test_replay.py": T + "buffers/test_replay.py",
    T + "test_replay_frames.py": T + "buffers/test_replay_frames.py",
    T + "test_returns.py": T + "buffers/test_returns.py",
    T + "test_storage.py": T + "buffers/test_storage.py",
    T + "test_vtrace.py": T + "buffers/test_vtrace.py",
    T + "test_compile.py": T + "numerics/test_compile.py",
    T + "test_optim_inference.py": T + "numerics/test_optim_inference.py",
    T + "test_precision.py": T + "numerics/test_precision.py",
    T + "test_records.py": T + "numerics/test_records.py",
    T + "test_eval_during_training.py": T + "learning/test_eval_during_training.py",
    T + "test_in_place.py": T + "learning/test_in_place.py",
    T + "test_learner_loop.py": T + "learning/test_learner_loop.py",
    T + "test_replay_ratio.py": T + "learning/test_replay_ratio.py",
    T + "test_memory_flat.py": T + "placement/test_memory_flat.py",
    T + "test_serial_placement.py": T + "placement/test_serial_placement.py",
    T + "test_spares.py": T + "placement/test_spares.py",
    T + "test_messages.py": T + "roles/test_messages.py",
    T + "test_offpolicy_collection.py": T + "roles/test_offpolicy_collection.py",
    T + "test_apex.py": T + "scheme/test_apex.py",
    T + "test_scheme.py": T + "scheme/test_scheme.py",
    T + "test_checkpoint.py": T + "runtime/test_checkpoint.py",
    T + "test_disk_errors.py": T + "runtime/test_disk_errors.py",
    T + "test_nonfinite.py": T + "runtime/test_nonfinite.py",
    T + "test_signals.py": T + "runtime/test_signals.py",
    T + "test_cli.py": T + "cli/test_cli.py",
    T + "test_refusals.py": T + "cli/test_refusals.py",
    T + "test_compression.py": T + "comm/test_compression.py",
    T + "test_faults.py": T + "comm/test_faults.py",
    T + "test_experiments.py": T + "experiments/test_experiments.py",
    T + "test_mixed_runs.py": T + "experiments/test_mixed_runs.py",
    T + "test_sweep.py": T + "experiments/test_sweep.py",
    T + "test_slurm_launcher.py": T + "slurm/test_slurm_launcher.py",
    T + "test_slurm_lifecycle.py": T + "slurm/test_slurm_lifecycle.py",
    T + "test_slurm_render.py": T + "slurm/test_slurm_render.py",
    T + "test_slurm_submit.py": T + "slurm/test_slurm_submit.py",
}
#: test files that stay: the whole package's tests (layers, code health, the front page),
#: the top-level modules' (hpcrl/evaluation.py, plugins.py, scripts.py), the quick lane's,
#: the benchmarks', and the helpers; and folders kept as they are: tests/mpi/ (multi-rank
#: tests, spread among workers by tests/conftest.py), tests/slurm/ (the test cluster's),
#: tests/comm/, tests/fakes/; and every folder this table moves tests into
TESTS_STAY = tuple(T + name for name in (
    "conftest.py", "quick_lane.py", "test_quick_lane.py", "test_layers.py",
    "test_code_health.py", "test_front_page.py", "test_evaluation.py", "test_plugins.py",
    "test_scripts.py", "test_recipes.py", "test_soak_verdict.py", "device_recording.py",
    "heap_probe.py", "her_episodes.py", "refusal_checks.py", "hpcrl_model_envs.py",
    "hpcrl_obs_envs.py", "kill_resume.py", "quiet_training.py", "user_script.py"))
TEST_DIRS_STAY = ("tests/mpi/", "tests/slurm/", "tests/comm/", "tests/fakes/")

#: edits of text that names the old layout in ways no table can (file, old, new); each is
#: applied where ``old`` is found and ``new`` is not
PATCHES: list[tuple[str, str, str]] = [
    ("tests/test_layers.py",
     '# what core may not import: the layers above it\nABOVE_CORE = ("config", ',
     '# the components (envs, models, buffers, algorithms and the numerics below them, '
     'formerly\n# core): what they may not import, the layers above them\n'
     'CORE = ("envs", "models", "buffers", "algorithms", "numerics")\n'
     'ABOVE_CORE = ("config", '),
    ("tests/test_layers.py",
     'BELOW_TOP = ("core", "comm",', 'BELOW_TOP = (*CORE, "comm",'),
    ("tests/test_layers.py",
     'upward = [why for (a, b), why in edges.items() if a == "core" and b in ABOVE_CORE]',
     'upward = [why for (a, b), why in edges.items() if a in CORE and b in ABOVE_CORE]'),
    ("tests/test_layers.py",
     '    probe = ("import importlib, pkgutil, sys, hpcrl.core as core\\n"\n'
     '             "for m in pkgutil.walk_packages(core.__path__, \'hpcrl.core.\'):\\n"\n'
     '             "    importlib.import_module(m.name)\\n"\n',
     '    probe = ("import importlib, pkgutil, sys\\n"\n'
     '             f"for name in {CORE}:\\n"\n'
     '             "    package = importlib.import_module(\'hpcrl.\' + name)\\n"\n'
     '             "    prefix = package.__name__ + \'.\'\\n"\n'
     '             "    for m in pkgutil.walk_packages(package.__path__, prefix):\\n"\n'
     '             "        importlib.import_module(m.name)\\n"\n'),
    ("tests/test_layers.py",
     'assert "core" in loaded and not loaded & set(ABOVE_CORE), loaded',
     'assert set(CORE) <= loaded and not loaded & set(ABOVE_CORE), loaded'),
    ("tests/test_layers.py",
     '``core`` (the algorithms, networks, storages and envs) imports nothing',
     'the components (``envs``, ``models``, ``buffers``, ``algorithms`` and ``numerics``,\n'
     'formerly ``core``) import nothing'),
    ("tests/test_layers.py",
     'assert _names(node, "hpcrl.core.x", False)[0] == "hpcrl.cli"',
     'assert _names(node, "hpcrl.models.x", False)[0] == "hpcrl.cli"'),
    ("tests/algorithms/test_capabilities.py",
     'REGISTRIES = {"core/algorithms/__init__.py", "core/algorithms/offpolicy/__init__.py",',
     'REGISTRIES = {"algorithms/__init__.py", "algorithms/offpolicy/__init__.py",'),
]


def run(*args: str) -> str:
    return subprocess.run(args, cwd=ROOT, check=True, capture_output=True, text=True).stdout


def dotted(path: str) -> str:
    """``hpcrl/core/envs.py`` -> ``hpcrl.core.envs``; a package's ``__init__`` -> the
    package."""
    return path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def module_pairs() -> list[tuple[str, str]]:
    """(old dotted name, new one) for every moved module and package, longest first."""
    pairs: dict[str, str] = {}
    for old, new in MODULES.items():
        if new is not None:
            pairs[dotted(old)] = dotted(new)
    return sorted(pairs.items(), key=lambda p: -len(p[0]))


def path_pairs() -> list[tuple[str, str]]:
    """(old path, new path) of files and of whole moved folders, longest first."""
    pairs: dict[str, str] = {old: new for old, new in MODULES.items() if new is not None}
    pairs.update(TESTS)
    for old, new in MODULES.items():
        if new is not None and old.endswith("/__init__.py"):
            pairs[old.removesuffix("__init__.py")] = new.removesuffix("__init__.py")
    return sorted(pairs.items(), key=lambda p: -len(p[0]))


def unmapped() -> list[str]:
    """Modules under hpcrl/core/ and hpcrl/placement/mpi/, and test files, in no table."""
    known = set(MODULES) | set(MODULES.values()) | set(STAYS) | set(TESTS) | set(
        TESTS.values()) | set(TESTS_STAY) | set(NEW_PACKAGES)
    found = []
    for path in sorted(run("git", "ls-files", "hpcrl/core", "hpcrl/placement/mpi",
                           "tests").split()):
        if not path.endswith(".py") or path in known:
            continue
        if path.startswith(TEST_DIRS_STAY):
            continue
        found.append(path)
    return found


def moves() -> tuple[list[tuple[str, str]], list[str]]:
    """The moves still to make, and the conflicts (target and source both present)."""
    todo, clashes = [], []
    for old, new in [*MODULES.items(), *TESTS.items()]:
        here, there = (ROOT / old).exists(), new is not None and (ROOT / new).exists()
        if here and there:
            clashes.append(f"{old} and {new} both exist")
        elif here:
            todo.append((old, new or ""))
    return todo, clashes


def depth(path: str) -> int:
    return path.count("/")


def rehop(text: str, delta: int) -> str:
    """The ``Path(__file__)`` hops of a test moved ``delta`` folders deeper, made to reach
    the same places."""
    if delta == 0:
        return text
    text = re.sub(r"(Path\(__file__\)(?:\.resolve\(\))?)\.parents\[(\d+)\]",
                  lambda m: f"{m[1]}.parents[{int(m[2]) + delta}]", text)
    text = re.sub(r"(Path\(__file__\)(?:\.resolve\(\))?)\.parent\b(?!s)",
                  lambda m: f"{m[1]}.parents[{delta}]", text)
    return re.sub(r"(Path\(__file__\)(?:\.resolve\(\))?)\.with_name\(([^)]*)\)",
                  lambda m: f"({m[1]}.parents[{delta}] / {m[2]})", text)


def from_import_of_module(text: str, pairs: list[tuple[str, str]]) -> str:
    """``from hpcrl.core import envs [as x]`` -> ``from hpcrl.envs import vector as envs``
    (one module imported from its package)."""
    table = dict(pairs)

    def fix(m: re.Match[str]) -> str:
        old = f"{m['package']}.{m['name']}"
        new = table.get(old)
        if new is None:
            return m[0]
        parent, _, leaf = new.rpartition(".")
        alias = m["alias"] or (m["name"] if leaf != m["name"] else None)
        return f"{m['indent']}from {parent} import {leaf}" + (f" as {alias}" if alias else "")

    return re.sub(r"(?m)^(?P<indent>[ \t]*)from (?P<package>hpcrl(?:\.\w+)*) import "
                  r"(?P<name>\w+)(?: as (?P<alias>\w+))?[ \t]*$", fix, text)


def rewrite(text: str) -> str:
    """``text`` with every old module name, file path, test path and renamed identifier
    replaced by its new one."""
    modules = module_pairs()
    text = from_import_of_module(text, modules)
    names = {old: new for old, new in modules}
    text = re.sub(r"(?<![\w.])(" + "|".join(re.escape(o) for o, _ in modules) + r")(?![\w])",
                  lambda m: names[m[1]], text)
    paths = dict(path_pairs())
    text = re.sub(r"(?<![\w./-])(" + "|".join(re.escape(o) for o in paths) + r")(?![\w])",
                  lambda m: paths[m[1]], text)
    for old, new in RENAMES.items():
        text = re.sub(rf"\b{old}\b", new, text)
    return text


def scope_files() -> list[Path]:
    listed = run("git", "ls-files", "--cached", "--others", "--exclude-standard",
                 *SCOPE).split()
    return [ROOT / p for p in sorted(set(listed))
            if p != THIS and Path(p).suffix in TEXT_SUFFIXES and (ROOT / p).is_file()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="report only; change nothing")
    args = parser.parse_args()

    missing = unmapped()
    todo, clashes = moves()
    if missing or clashes:
        for path in missing:
            print(f"relayout: {path} is in no table of {THIS} (MODULES, STAYS, TESTS or "
                  f"TESTS_STAY): add it", file=sys.stderr)
        for clash in clashes:
            print(f"relayout: {clash}: merge them by hand first", file=sys.stderr)
        return 1
    if args.check:
        print(f"relayout: {len(todo)} moves to make")
        return 0

    changed: list[str] = []
    for old, new in todo:
        if not new:
            run("git", "rm", "-q", old)
            changed.append(f"removed {old}")
            continue
        (ROOT / new).parent.mkdir(parents=True, exist_ok=True)
        run("git", "mv", old, new)
        changed.append(f"moved {old} -> {new}")
        if old.startswith("tests/") and depth(new) != depth(old):
            target = ROOT / new
            target.write_text(rehop(target.read_text(), depth(new) - depth(old)))
    for path, text in NEW_PACKAGES.items():
        if not (ROOT / path).exists():
            (ROOT / path).parent.mkdir(parents=True, exist_ok=True)
            (ROOT / path).write_text(text)
            run("git", "add", path)
            changed.append(f"created {path}")

    touched: list[str] = []
    for file in scope_files():
        try:
            before = file.read_text()
        except UnicodeDecodeError:
            continue
        after = rewrite(before)
        relative = file.relative_to(ROOT).as_posix()
        for target, old, new in PATCHES:
            if relative == target and old in after and new not in after:
                after = after.replace(old, new)
        if after != before:
            file.write_text(after)
            touched.append(relative)
    changed += [f"rewrote {path}" for path in touched]
    python = [p for p in touched if p.endswith(".py")]
    if python:
        subprocess.run([sys.executable, "-m", "ruff", "check", "-q", "--select", "I", "--fix",
                        *python], cwd=ROOT, check=False)
    # folders the moves emptied (left with caches only) would import as namespace packages
    for folder in ("hpcrl/core", "hpcrl/placement/mpi"):
        for sub in sorted((ROOT / folder).rglob("*"), reverse=True) if (
                ROOT / folder).exists() else []:
            if sub.is_dir() and not any(f.suffix == ".py" for f in sub.rglob("*")):
                shutil.rmtree(sub)
        path = ROOT / folder
        if path.exists() and not any(f.suffix == ".py" for f in path.rglob("*")):
            shutil.rmtree(path)
    if changed:
        run("git", "add", "-A", *SCOPE)
    print("\n".join(changed) if changed else "relayout: nothing to do: the tree has the new "
          "layout")
    return 0


if __name__ == "__main__":
    sys.exit(main())
