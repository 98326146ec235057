"""An algorithm family is one declared object (issue 52): the built-ins declare theirs, generic
code asks it and keys nothing on the family, and a plug-in family of its own (evolution
strategies, examples/evolution_strategies.py: its data path, unit, stream layout and
collectors) learns through ``hpcrl train --set algo.name=module:Class`` in one process (its
MPI scheme: tests/placement/mpi/test_mpi_plugins.py)."""
from __future__ import annotations

import csv
import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from hpcrl.algorithms import algorithm_type
from hpcrl.algorithms.family import REPLAY, ROLLOUTS, Family
from hpcrl.cli import main
from hpcrl.components.import_paths import load

ROOT = Path(__file__).parents[2]
sys.path.insert(0, str(ROOT / "examples"))  # the examples' modules, as PYTHONPATH=examples
ES = "evolution_strategies:EvolutionStrategies"


def test_every_built_in_declares_its_family_and_its_wiring_loads():
    for name, family in [("ppo", ROLLOUTS), ("a2c", ROLLOUTS), ("impala", ROLLOUTS),
                         ("dqn", REPLAY), ("sac", REPLAY), ("td3", REPLAY), ("mpc", REPLAY)]:
        assert algorithm_type(name).family is family
    for family in (ROLLOUTS, REPLAY):
        wiring = load(family.wiring, "algo.name")
        assert all(callable(getattr(wiring, m)) for m in
                   ("data_path", "stream_layout", "collector", "acting_spec"))
    assert (ROLLOUTS.unit, REPLAY.unit) == ("rollout", "chunk")


def test_no_table_branch_or_protocol_outside_algorithms_and_config_is_keyed_by_family():
    """The five tables (DATA_PATHS, DATA_SUMMARIES, STREAM_LAYOUTS, COLLECTORS, _SPECS) are
    gone, and nothing outside algorithms/ and config/ looks a family up by its words."""
    keyed = re.compile(r"""\{\s*["'](rollouts?|chunk|replay)["']\s*:"""
                       r"""|learns_from|collection_unit\]|==\s*["'](rollouts|chunk)["']""")
    found = []
    for path in (ROOT / "hpcrl").rglob("*.py"):
        parts = path.relative_to(ROOT / "hpcrl").parts
        if parts[0] in ("algorithms", "config"):
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if keyed.search(line) and not line.lstrip().startswith(("#", '"', "'")):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)
    for name in ("DATA_PATHS", "DATA_SUMMARIES", "STREAM_LAYOUTS", "COLLECTORS", "_SPECS"):
        assert not any(name in p.read_text() for p in (ROOT / "hpcrl").rglob("*.py")), name


@pytest.mark.timeout(150)
def test_a_plugin_family_of_its_own_learns_cartpole_in_one_process(tmp_path):
    """Evolution strategies: every env plays one episode with its own perturbation of the
    weights, its collector streams one return per env, its learner steps the weights; no
    file of hpcrl names it."""
    assert isinstance(algorithm_type(ES).family, Family)
    assert algorithm_type(ES).family.unit == "evaluations"
    plan = CliRunner().invoke(main, ["plan", "--set", f"algo.name={ES}"])
    assert plan.exit_code == 0 and "8 perturbed policies a collector, sigma 0.05" in plan.output
    run = tmp_path / "run"
    args = ["train", "--run-dir", str(run)]
    for item in [f"algo.name={ES}", "algo.num_steps=500", "algo.lr=0.03",
                 "train.total_env_steps=40000", "train.eval_episodes=0",
                 "train.tensorboard=false"]:
        args += ["--set", item]
    out = CliRunner().invoke(main, args, catch_exceptions=False)
    assert out.exit_code == 0, out.output
    with open(run / "progress.csv") as f:
        curve = [float(r["episode_return_mean"]) for r in csv.DictReader(f)]
    # about 11 at the first update (random weights), about 170 at 40k steps here
    assert curve[-1] >= 100 and curve[-1] >= 4 * curve[0], curve
    names = re.compile(r"(import|from)\s+evolution_strategies|evolution_strategies:")
    assert not any(names.search(p.read_text()) for p in (ROOT / "hpcrl").rglob("*.py"))
