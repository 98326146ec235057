"""A cooperative game whose agents all share the trained policy (``env.agents=shared``):
PPO learns above random play from every agent's steps, evaluates, records a video and
resumes exactly (serial runs; tests/slurm/test_templates.py runs one on collector ranks)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from kill_resume import rows, whole_then_killed_and_resumed

from hpcrl.cli import main
from hpcrl.config.loader import load_config
from hpcrl.envs.multiagent.joint_agents import JointAgentsEnv
from hpcrl.learning.evaluation import EVAL_SEED_OFFSET
from hpcrl.placement.serial_run import Trainer
from hpcrl.runtime.run_dir import RunDir

pytest.importorskip("mpe2")
RECIPE = Path(__file__).resolve().parents[2] / "examples" / "spread-shared-ppo.yaml"


def _config(**train):
    """The cooperative recipe (examples/spread-shared-ppo.yaml) at ``train``'s budget."""
    return load_config(RECIPE, [f"train.{key}={value}" for key, value in train.items()])


def _random_play(episodes: int, seed: int) -> float:
    """The mean agent's return of uniformly random moves, from evaluation's seeds."""
    game, rng, total = JointAgentsEnv("mpe2.simple_spread_v3"), np.random.default_rng(0), 0.0
    for episode in range(episodes):
        game.reset(seed=seed + EVAL_SEED_OFFSET + episode)
        done = False
        while not done:
            _, reward, terminated, truncated, _ = game.step(rng.integers(0, 5, size=3))
            total, done = total + reward, terminated or truncated
    return total / episodes


@pytest.mark.timeout(150)
def test_shared_ppo_covers_the_landmarks_better_than_random_play(tmp_path: Path):
    run = tmp_path / "run"
    config = _config(total_env_steps=120_000)
    Trainer(config, RunDir(run), console=None).train()
    cli = CliRunner()
    played = cli.invoke(main, ["eval", str(run), "-n", "50", "--json"])
    assert played.exit_code == 0, played.output
    trained = float(played.output.split('"mean_return": ')[1].split(",")[0])
    random_play = _random_play(50, config.seed)
    assert trained > random_play + 3.5, (trained, random_play)
    against = cli.invoke(main, ["eval", str(run), "-n", "1", "--opponent", "random"])
    assert against.exit_code != 0 and "env.agents=shared" in against.output
    video = tmp_path / "spread.gif"  # the game renders its own frames, all agents in them
    recorded = cli.invoke(main, ["eval", str(run), "-n", "1", "--video", str(video)])
    assert recorded.exit_code == 0 and video.stat().st_size > 1000, recorded.output


@pytest.mark.timeout(120)
def test_a_shared_agents_run_killed_mid_run_resumes_exactly(tmp_path: Path, monkeypatch):
    config = _config(total_env_steps=6000, checkpoint_every=2, eval_episodes=0)
    config.algo.num_steps = 40  # checkpoints inside games of 25 steps: their moves replayed
    config.scheme.env_groups = 2  # two groups of 4 games, acting in turn
    whole, cut = whole_then_killed_and_resumed(config, tmp_path, monkeypatch, die_at=3)
    assert rows(cut) == rows(whole)
    last = [torch.load(RunDir(run).checkpoint_path, weights_only=True)["policy"]
            for run in (whole, cut)]
    for name, tensor in last[0]["state_dict"].items():
        assert torch.equal(tensor, last[1]["state_dict"][name]), name


def test_a_recurrent_shared_policy_keeps_one_state_per_agent_in_evaluation(monkeypatch):
    """Each agent of each game carries its own memory: episodes played 4 at once give the
    returns they give one at a time (a state mixed up between rows would change them)."""
    from hpcrl.build import env_spaces, make_actor
    from hpcrl.learning import evaluation

    config = _config(**{"eval_episodes": 4})
    config.actor.memory = "gru"
    torch.manual_seed(0)
    actor = make_actor(config, env_spaces(config))
    together = evaluation.evaluate(actor, config.env, 4, seed=3)["returns"]
    monkeypatch.setattr(evaluation, "MAX_PARALLEL_EPISODES", 1)
    alone = evaluation.evaluate(actor, config.env, 4, seed=3)["returns"]
    assert together == alone and len(set(together)) == 4
