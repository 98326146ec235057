"""MinAtar ids work as ``env.id`` with no module prefix: hpcrl registers them (the ``minatar``
package only does when ``minatar.gym.register_envs()`` is called), and Breakout trains,
evaluates and resumes from the CLI."""
from __future__ import annotations

import builtins
import json

import gymnasium as gym
import numpy as np
import pytest
from click.testing import CliRunner

from hpcrl.cli import main
from hpcrl.config import from_dict
from hpcrl.config.loader import ConfigError
from hpcrl.envs.vector import probe_spaces

pytest.importorskip("minatar", reason='needs pip install "hpcrl[minatar]"')


def test_breakout_observes_bool_channels_last():
    spaces = probe_spaces(from_dict({}, ["env.id=MinAtar/Breakout-v1"]).env)
    assert spaces.obs_shape == (10, 10, 4)
    assert spaces.action_space == gym.spaces.Discrete(3)


def invoke(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def train_breakout(run, steps: int, eval_episodes: int) -> list[float]:
    """``hpcrl train`` on Breakout with the embedded default; the episode-return column."""
    out = invoke("train", "--run-dir", run, "--set", "env.id=MinAtar/Breakout-v1",
                 "--set", f"train.total_env_steps={steps}",
                 "--set", f"train.eval_episodes={eval_episodes}",
                 "--set", "train.tensorboard=false")
    assert out.exit_code == 0, out.output
    header, *rows = (run / "progress.csv").read_text().strip().splitlines()
    column = header.split(",").index("episode_return_mean")
    return [float(r.split(",")[column]) for r in rows]


@pytest.mark.timeout(300)
def test_breakout_trains_evaluates_and_resumes_from_the_cli(tmp_path):
    run = tmp_path / "run"
    returns = train_breakout(run, 4096, 2)
    assert any(np.isfinite(returns)), "Breakout episodes end within a few hundred steps"
    assert json.loads((run / "eval.json").read_text())["episodes"] == 2

    resumed = invoke("train", "--resume", run, "--set", "train.total_env_steps=5120")
    assert resumed.exit_code == 0, resumed.output
    last = (run / "progress.csv").read_text().strip().splitlines()[-1]
    assert int(last.split(",")[0]) == 5120


def test_missing_minatar_is_one_line_naming_the_install(monkeypatch):
    for env_id in [k for k in gym.registry if k.startswith("MinAtar/")]:
        monkeypatch.delitem(gym.registry, env_id)
    real_import = builtins.__import__

    def no_minatar(name, *args, **kwargs):
        if name.split(".")[0] == "minatar":
            raise ImportError("No module named 'minatar'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_minatar)
    with pytest.raises(ConfigError) as err:
        from_dict({}, ["env.id=MinAtar/Breakout-v1"])
    message = str(err.value)
    assert "\n" not in message and 'pip install "hpcrl[minatar]"' in message


@pytest.mark.timeout(300)
def test_ppo_learns_breakout_on_a_short_seeded_budget(tmp_path):
    """The embedded default (PPO, MLP over the bool planes), 25k steps: Breakout's return
    goes from about 0.2 (random play) past 2.5 (4.4 here at 30k, 5.0 eval at 60k)."""
    run = tmp_path / "run"
    returns = train_breakout(run, 25000, 5)
    assert np.mean(returns[:3]) < 1.0 and np.mean(returns[-5:]) > 2.5, returns
    assert json.loads((run / "eval.json").read_text())["mean_return"] > 2.0


def test_normalised_image_observations_keep_their_shape_through_training_and_resume(tmp_path):
    """``env.normalize_obs`` on frames: the moments travel flat in messages and fold back into
    statistics of the frame's shape (this used to stop at the first update)."""
    import torch

    run = tmp_path / "norm"
    for steps in (1024, 2048):
        args = ["train", "--set", f"train.total_env_steps={steps}",
                "--set", "train.eval_episodes=1", "--set", "train.tensorboard=false"]
        if steps == 1024:
            args += ["--run-dir", run, "--set", "env.id=MinAtar/Breakout-v1",
                     "--set", "env.normalize_obs=true"]
        else:
            args += ["--resume", run]
        out = invoke(*args)
        assert out.exit_code == 0, out.output
    ckpt = torch.load(run / "checkpoints" / "last.pt", weights_only=True)
    state = ckpt["policy"]["state_dict"]
    assert state["obs_rms.mean"].shape == (10, 10, 4)
    assert float(state["obs_rms.count"]) >= 2048 and float(state["obs_rms.var"].max()) > 0


@pytest.mark.timeout(300)
@pytest.mark.parametrize("memory,algo", [("gru", "ppo"), ("lstm", "a2c")])
def test_a_cnn_with_memory_trains_evaluates_resumes_and_loads(tmp_path, memory, algo):
    """Pixels through a CNN into a memory core: the wiring, on a few thousand steps."""
    import hpcrl

    run = tmp_path / "run"
    sets = ["env.id=MinAtar/Breakout-v1", "actor.encoder=impala_resnet", "actor.features=64",
            f"actor.memory={memory}", "actor.memory_size=32", f"algo.name={algo}",
            "train.total_env_steps=2048", "train.eval_episodes=2", "train.tensorboard=false",
            *(["algo.ppo.num_epochs=2"] if algo == "ppo" else [])]
    out = invoke("train", "--run-dir", run, *[a for s in sets for a in ("--set", s)])
    assert out.exit_code == 0, out.output
    assert json.loads((run / "eval.json").read_text())["episodes"] == 2
    resumed = invoke("train", "--resume", run, "--set", "train.total_env_steps=3072")
    assert resumed.exit_code == 0, resumed.output
    policy = hpcrl.load_policy(run)
    env = gym.make("MinAtar/Breakout-v1")
    obs, _ = env.reset(seed=0)
    action, state = policy(obs, None)
    action, state = policy(obs, state)
    assert state.shape == (policy.state_size,) and 0 <= int(action) < 3


def test_a_cnn_too_big_for_the_frames_is_one_line_from_the_cli(tmp_path):
    runner = CliRunner()
    out = runner.invoke(main, ["train", "--run-dir", str(tmp_path / "run"), "--set",
                               "env.id=MinAtar/Breakout-v1", "--set", "actor.encoder=nature_cnn"])
    assert out.exit_code != 0 and "Traceback" not in out.output
    assert "10x10 pixels are too small for actor.encoder=nature_cnn" in out.output
