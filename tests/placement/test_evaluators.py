"""Evaluator ranks (scheme.evaluators) in one process: their place in the rank table and
in `hpcrl plan`, and the configs refused. The jobs that run them under a real mpiexec are in
tests/placement/mpi/test_mpi_evaluators.py."""
from __future__ import annotations

import pytest

from hpcrl.config import ConfigError, load_config
from hpcrl.placement.job import describe_role
from hpcrl.scheme import EVALUATOR, assign_roles, describe, required_world_size
from hpcrl.scheme.plan import plan_json, plan_text

ASYNC = ["scheme.preset=async-ppo", "train.eval_every=1000"]


def test_evaluators_come_last_in_the_rank_table_and_count_in_the_world():
    cfg = load_config(None, ASYNC + ["scheme.evaluators=2"])
    assert required_world_size(cfg.scheme) == 1 + 2 + 2
    table = assign_roles(5, cfg.scheme, cfg.env.num_envs)
    assert [r.role for r in table[-2:]] == [EVALUATOR, EVALUATOR]
    assert all(r.fed_by == (0,) and r.feeds == (0,) for r in table[-2:])
    assert table[0].feeds == (3, 4) and table[0].fed_by == (1, 2, 3, 4)
    assert not any(r.collects or r.learner or r.num_envs for r in table[-2:])
    assert describe(cfg.scheme) == "1 gradient worker + 2 collectors + 2 evaluators"
    assert describe_role(table[-1]) == "evaluator"


def test_hpcrl_plan_shows_the_evaluator():
    cfg = load_config(None, ASYNC + ["scheme.evaluators=1"])
    text = plan_text(cfg)
    assert "+ 1 evaluator" in text and "mpiexec -n 4" in text
    assert text.splitlines()[-1].split()[:2] == ["3", "evaluator"]
    assert plan_json(cfg)["ranks"][-1]["role"] == "evaluator"


def test_no_evaluators_change_nothing():
    with_key = load_config(None, ASYNC + ["scheme.evaluators=0"])
    assert plan_text(with_key) == plan_text(load_config(None, ASYNC))


@pytest.mark.parametrize("sets,message", [
    (ASYNC + ["scheme.evaluators=-1"], "'scheme.evaluators' must be >= 0"),
    (["scheme.preset=serial", "train.eval_every=1000", "scheme.evaluators=1"],
     "this scheme is one process"),
    (["scheme.preset=a2c", "scheme.evaluators=1"],
     "scheme.evaluators=1 evaluates every train.eval_every env steps, but that is 0"),
])
def test_evaluators_where_they_cannot_work_are_refused(sets, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, sets)
