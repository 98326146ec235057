"""Every env family Gymnasium ships, and every suite hpcrl registers, trains, evaluates,
resumes and loads, as a user runs it.

For each env: ``hpcrl train`` (the CLI, with the default algorithm) for a few thousand
steps, then ``hpcrl eval``, ``hpcrl train --resume`` and ``hpcrl.load_policy`` on the run,
and the loaded policy acts on the env's raw observation. Box2D and MuJoCo come with the
``[test]`` extra, and so do MinAtar, MiniGrid and Crafter (here) and Atari (its preprocessing
chain makes its own test, ``tests/envs/test_atari.py``); DeepMind Control and PyBullet run where
their extras are installed (``[dmc]``, ``[pybullet]``) and are skipped, naming the extra,
where they are not.
"""
from __future__ import annotations

import importlib.util
import json

import gymnasium as gym
import numpy as np
import pytest
import torch
from click.testing import CliRunner

import hpcrl
from hpcrl.cli import main
from hpcrl.envs.suites.suite_ids import suite_of

FAMILIES = {
    "classic control": ["CartPole-v1", "Acrobot-v1", "MountainCar-v0",
                        "MountainCarContinuous-v0", "Pendulum-v1"],
    "toy text": ["FrozenLake-v1", "Taxi-v4", "CliffWalking-v1", "Blackjack-v1"],
    "box2d": ["LunarLander-v3", "LunarLanderContinuous-v3", "BipedalWalker-v3",
              "CarRacing-v3"],
    "mujoco": ["HalfCheetah-v5", "Hopper-v5", "InvertedPendulum-v5"],
    "minatar": ["MinAtar/Breakout-v1"],  # Atari (env.preset=atari): tests/envs/test_atari.py
    "minigrid": ["MiniGrid-DoorKey-5x5-v0"],
    "crafter": ["CrafterReward-v1"],
    "dmc": ["dm_control/cartpole-swingup-v0"],
    "pybullet": ["HopperBulletEnv-v0"],
}


def installed(env_id: str) -> list[pytest.MarkDecorator]:
    """A skip naming the extra, for an id of a suite whose package is not installed."""
    found = suite_of(env_id)
    if found is None or all(importlib.util.find_spec(m) for m in found[0].modules):
        return []
    return [pytest.mark.skip(reason=f"needs {found[0].install}")]


CASES = [pytest.param(env_id, id=f"{family}:{env_id}", marks=installed(env_id))
         for family, ids in FAMILIES.items() for env_id in ids]
QUICK = ["env.num_envs=4", "algo.num_steps=64", "algo.ppo.minibatch_size=64",
         "algo.ppo.num_epochs=2",
         "train.eval_episodes=1", "train.tensorboard=false", "train.log_interval_s=60",
         "env.kwargs={max_episode_steps: 300}"]


def invoke(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def sets(items: list[str]) -> list[str]:
    return [x for item in items for x in ("--set", item)]


@pytest.mark.timeout(240)
@pytest.mark.parametrize("env_id", CASES)
def test_family_trains_evaluates_resumes_and_loads(env_id, tmp_path):
    run = tmp_path / "run"
    # CarRacing renders every step (about 10 ms): shorter episodes and runs keep it to seconds
    racing = env_id == "CarRacing-v3"
    short = ["env.kwargs={max_episode_steps: 100}"] if racing else []
    if env_id.startswith("Crafter"):  # a 32x32 world: 4x less to generate at each reset
        short = ["env.kwargs={max_episode_steps: 300, area: [32, 32]}"]  # (1.6 s at 64x64
        # in pure Python, without the [crafter] extra's numba, which [test] leaves out)
    steps = 512 if racing else 1024  # two updates, then two more on resume
    out = invoke("train", "--run-dir", run,
                 *sets(QUICK + short + [f"env.id={env_id}", f"train.total_env_steps={steps}"]))
    assert out.exit_code == 0, out.output
    assert json.loads((run / "eval.json").read_text())["episodes"] == 1

    evaluated = invoke("eval", run, "--episodes", "1", "--json")
    assert evaluated.exit_code == 0, evaluated.output
    assert np.isfinite(json.loads(evaluated.output.strip().splitlines()[-1])["mean_return"])

    resumed = invoke("train", "--resume", run, "--set", f"train.total_env_steps={2 * steps}")
    assert resumed.exit_code == 0, resumed.output
    rows = (run / "progress.csv").read_text().strip().splitlines()
    assert int(rows[-1].split(",")[0]) == 2 * steps  # env_steps, the first column

    policy = hpcrl.load_policy(run)
    env = gym.make(env_id, max_episode_steps=300)
    obs, _ = env.reset(seed=0)
    with torch.inference_mode():
        action = policy(obs).numpy()
    assert env.action_space.contains(int(action) if action.ndim == 0
                                     else np.clip(action, env.action_space.low,
                                                  env.action_space.high).astype(
                                         env.action_space.dtype))
    env.close()
