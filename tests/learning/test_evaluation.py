"""Evaluation plays its episodes side by side: episode i starts from its own seed, so the
returns are the same whether the episodes run one at a time, in waves or all at once."""
import pytest
import torch

import hpcrl.learning.evaluation as evaluation
from hpcrl.build import env_spaces
from hpcrl.config import from_dict
from hpcrl.models.actor import ActorCritic


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Blackjack-v1"])
def test_returns_do_not_depend_on_how_episodes_are_grouped(env_id, monkeypatch):
    config = from_dict({}, [f"env.id={env_id}"])
    torch.manual_seed(0)
    actor = ActorCritic(env_spaces(config), config.actor)  # untrained: varied episodes
    together = evaluation.evaluate(actor, config.env, 7, config.seed)["returns"]
    for parallel in (1, 3):
        monkeypatch.setattr(evaluation, "MAX_PARALLEL_EPISODES", parallel)
        assert evaluation.evaluate(actor, config.env, 7, config.seed)["returns"] == together
    assert len(together) == 7 and len(set(together)) > 1  # distinct seeds, distinct games


def _train(run, *sets):
    from click.testing import CliRunner

    from hpcrl.cli import main

    args = ["train", "--run-dir", str(run)]
    for item in sets:
        args += ["--set", item]
    out = CliRunner().invoke(main, args, catch_exceptions=False)
    assert out.exit_code == 0, out.output
    return out.output


def _eval(*args):
    from click.testing import CliRunner

    from hpcrl.cli import main

    out = CliRunner().invoke(main, ["eval", *map(str, args)], catch_exceptions=False)
    assert out.exit_code == 0, out.output
    return out.output


@pytest.mark.timeout(120)
def test_an_env_without_a_time_limit_gets_its_evaluation_episodes_cut_and_counted(tmp_path):
    """CliffWalking has no time limit, and a deterministic policy that walks into a wall
    never ends an episode: the final evaluation, train.eval_every's and hpcrl eval all end,
    each cut episode counted as truncated and said beside the mean return."""
    import csv
    import json

    run = tmp_path / "cliff"
    out = _train(run, "env.id=CliffWalking-v1", "train.total_env_steps=2048",
                 "train.eval_every=1024", "train.eval_episodes=2",
                 "train.eval_max_episode_steps=300")
    # the policy 2,048 steps teach walks into a wall from the start, as it did on the day
    # this test was written: every evaluation episode is cut
    final = json.loads((run / "eval.json").read_text())
    assert final["max_episode_steps"] == 300 and final["truncated"] == 2
    assert "(2 of 2 episodes cut at 300 steps: train.eval_max_episode_steps)" in out
    rows = list(csv.DictReader(open(run / "eval.csv")))
    assert [r["truncated"] for r in rows] == ["2", "2"]

    text = _eval(run, "--episodes", 3, "--max-episode-steps", 50)
    assert "(3 of 3 episodes cut at 50 steps: --max-episode-steps)" in text
    result = json.loads(_eval(run, "--episodes", 3, "--max-episode-steps", 50, "--json"))
    assert result["max_episode_steps"] == 50 and result["truncated"] == 3
    default = json.loads(_eval(run, "--episodes", 1, "--json"))  # the run's own cap
    assert default["max_episode_steps"] == 300 and default["truncated"] == 1


def test_the_default_cap_is_the_envs_own_time_limit_or_27000_steps():
    import gymnasium as gym

    config = from_dict({})
    assert evaluation.episode_cap(config.train.eval_max_episode_steps,
                                  gym.make("CartPole-v1")) == 500
    assert evaluation.episode_cap(0, gym.make("CliffWalking-v1")) == 27_000
    assert evaluation.episode_cap(40, gym.make("CartPole-v1")) == 40


class _WallWalker(torch.nn.Module):
    """A deterministic CliffWalking policy that walks up into the wall for ever."""

    def forward(self, obs):
        return torch.zeros(len(obs), dtype=torch.int64)  # action 0: up


def test_a_cut_episode_is_truncated_and_an_env_s_own_limit_is_not():
    config = from_dict({}, ["env.id=CliffWalking-v1", "train.eval_max_episode_steps=25"])
    result = evaluation.evaluate(_WallWalker(), config.env, 3, config.seed,
                                 config.train.eval_max_episode_steps)
    assert result["returns"] == [-25.0] * 3 and result["truncated"] == 3
    cartpole = from_dict({})  # CartPole's own TimeLimit at 500 ends its episodes itself
    balanced = evaluation.run_episodes(_WallWalker(), cartpole.env, 2, cartpole.seed)
    assert balanced.truncated == 0 and balanced.max_steps == 500


def test_a_long_evaluation_says_how_far_it_got(monkeypatch):
    import io

    monkeypatch.setattr(evaluation, "PROGRESS_EVERY_S", 0.0)
    console = io.StringIO()
    config = from_dict({}, ["env.id=CliffWalking-v1", "train.eval_max_episode_steps=5"])
    evaluation.evaluate(_WallWalker(), config.env, 2, config.seed, 5, console=console)
    assert "eval: 2 of 2 episodes done, 10 steps in" in console.getvalue()
    quiet = io.StringIO()
    monkeypatch.setattr(evaluation, "PROGRESS_EVERY_S", 60.0)
    evaluation.evaluate(_WallWalker(), config.env, 2, config.seed, 5, console=quiet)
    assert quiet.getvalue() == ""  # a short one stays silent
