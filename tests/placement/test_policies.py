"""A job's policies are a list, one policy today (issue 52: the next step puts several in a
job); a user with one policy sees nothing change: the plan, the checkpoint and the progress
file name no policy and hold what they held before the list."""
from __future__ import annotations

import csv
import json

import pytest
from click.testing import CliRunner

from hpcrl.algorithms import algorithm_type
from hpcrl.cli import main
from hpcrl.comm.world import SelfComm
from hpcrl.config import from_dict
from hpcrl.placement.job import build_job
from hpcrl.placement.policies import MAIN, job_policies
from hpcrl.scheme.plan import rank_table


@pytest.mark.parametrize("preset,algo", [("ddppo", "ppo"), ("impala", "impala"),
                                         ("a3c", "a2c"), ("apex", "dqn")])
def test_a_job_has_one_policy_learnt_by_every_learner_rank(preset, algo):
    config = from_dict({"algo": {"name": algo}, "scheme": {"preset": preset}})
    table = rank_table(config)
    (policy,) = job_policies(algo, table)
    assert policy.name == MAIN and policy.algorithm is algorithm_type(algo)
    assert policy.learner_ranks == tuple(r.rank for r in table if r.learner)
    assert policy.family is algorithm_type(algo).family


def test_a_rank_reads_its_algorithm_and_wiring_through_its_policy():
    job = build_job(from_dict({}), SelfComm())
    assert len(job.policies) == 1 and job.policy is job.policies[0]
    assert job.algorithm_type is job.policy.algorithm is algorithm_type("ppo")
    assert job.wiring is job.policy.wiring
    assert job.policy.learner_ranks == (0,)


def test_one_policy_looks_as_before(tmp_path):
    from hpcrl.runtime.checkpoint import load_checkpoint

    plan = json.loads(CliRunner().invoke(main, ["plan", "--json", "--set",
                                               "scheme.preset=impala"]).output)
    assert sorted(plan) == ["agent", "capabilities", "collection", "gradients", "preset",
                            "ranks", "summary", "total_envs", "transport", "update",
                            "world_size"]
    assert sorted(plan["ranks"][0]) == ["collects", "device", "env_offset", "envs", "fed_by",
                                        "feeds", "group", "inference", "learner", "num_envs",
                                        "rank", "role"]
    run = tmp_path / "run"
    out = CliRunner().invoke(main, ["train", "--run-dir", str(run), "--set",
                                    "train.total_env_steps=1024", "--set",
                                    "train.eval_episodes=0", "--set",
                                    "train.tensorboard=false"])
    assert out.exit_code == 0, out.output
    state = load_checkpoint(run / "checkpoints" / "last.pt")
    assert sorted(state) == ["collector_ranks", "counters", "episodes", "format",
                             "live_collectors", "placement", "policy", "rng", "world_size"]
    assert sorted(state["placement"]) == ["collectors", "updater"]
    with open(run / "progress.csv") as f:
        header = next(csv.reader(f))
    assert header[:7] == ["env_steps", "updates", "wall_time_s", "fps",
                          "episode_return_mean", "episode_length_mean", "episodes"]
    assert not any("polic" in name and name != "policy_loss" and name != "policy_lag"
                   for name in header)
    # (the one place: env.league.player, the default name of a league's trained policy,
    # listed with the other env.league defaults every config shows)
    assert "main" not in (run / "config.yaml").read_text().replace("player: main", "")
