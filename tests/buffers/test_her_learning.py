"""Hindsight replay learns a sparse goal task that plain replay does not, on the same short
seeded budget (hpcrl.tasks:PointReach-v0: reach a random goal within 0.05 in 50 steps, -1 reward
per step away from it; random play succeeds in about 1% of the episodes)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from quiet_training import train_quietly

from hpcrl.cli import main
from hpcrl.learning.evaluation import evaluate

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TASK = ["env.id=hpcrl.tasks:PointReach-v0", "env.num_envs=1", "actor.hidden_sizes=[64,64]",
        "actor.activation=relu", "actor.ortho_init=false", "algo.lr=1e-3",
        "algo.lr_schedule=constant", "algo.max_grad_norm=0", "algo.num_steps=500",
        "replay.batch_size=128", "replay.learning_starts=500"]


def success_rate(tmp_path: Path, overrides: list[str]) -> float:
    trainer = train_quietly(tmp_path, TASK + overrides)
    return evaluate(trainer.actor, trainer.config.env, 50, trainer.config.seed)["success_rate"]


@pytest.mark.slow
def test_sac_with_her_reaches_goals_that_plain_sac_never_reaches(tmp_path):
    # 3000 env steps, seed 0 (9 s and 7 s here): SAC + HER 'future' succeeds in 0.78 of 50
    # evaluation episodes, plain SAC in 0.00 (its replay holds nearly no reward)
    budget = ["algo.name=sac", "train.total_env_steps=3000"]
    her = success_rate(tmp_path / "her", budget + ["replay.her_strategy=future"])
    plain = success_rate(tmp_path / "plain", budget)
    assert her >= 0.6, her
    assert plain <= 0.1, plain


@pytest.mark.slow
@pytest.mark.parametrize("algo, strategy, floor", [
    # 4000 env steps, seed 0, gamma 0.95, 4-8 s each: td3 1.00, ddpg 1.00 ('future'), sac
    # 'final' 0.90, sac 'episode' 0.90; without HER, sac and td3 0.00 on this budget. SAC
    # with 'future' learns in the test above; 'final' relabels a subset of what 'episode'
    # does (tests/buffers/test_her.py checks each strategy's goals), so 'episode' stands for both
    ("td3", "future", 0.6), ("ddpg", "future", 0.6), ("sac", "episode", 0.6)])
def test_her_learns_the_goal_task_with_each_agent_and_strategy(tmp_path, algo, strategy,
                                                               floor):
    rate = success_rate(tmp_path, [f"algo.name={algo}", f"replay.her_strategy={strategy}",
                                   "algo.gamma=0.95", "train.total_env_steps=4000"])
    assert rate >= floor, rate


@pytest.mark.timeout(300)
def test_the_her_recipe_trains_from_the_cli_and_eval_reports_its_success_rate(tmp_path):
    run = tmp_path / "run"
    out = CliRunner().invoke(main, [
        "train", str(EXAMPLES / "her-sac.yaml"), "--run-dir", str(run),
        "--set", "train.total_env_steps=2000", "--set", "algo.num_steps=500",
        "--set", "replay.learning_starts=500", "--set", "actor.hidden_sizes=[64,64]",
        "--set", "train.eval_episodes=5", "--set", "train.tensorboard=false"],
        catch_exceptions=False)
    assert out.exit_code == 0, out.output
    assert "success rate" in out.output
    assert 0.0 <= json.loads((run / "eval.json").read_text())["success_rate"] <= 1.0
    out = CliRunner().invoke(main, ["eval", str(run), "--episodes", "4", "--json"],
                             catch_exceptions=False)
    assert out.exit_code == 0, out.output
    result = json.loads(out.output.strip().splitlines()[-1])
    assert result["env_id"] == "hpcrl.tasks:PointReach-v0" and result["episodes"] == 4
    assert 0.0 <= result["success_rate"] <= 1.0
