"""Box2D envs, whose state holds numpy scalars, leave checkpoints that eval, resume and load."""
import io
import json

import gymnasium as gym
import numpy as np
import pytest
import torch
from click.testing import CliRunner

import hpcrl
from hpcrl.cli import main
from hpcrl.envs.state import capture_env_state, restore_env_state
from hpcrl.runtime.checkpoint import load_checkpoint, unloadable_value
from hpcrl.runtime.run_dir import RunDir

pytest.importorskip("Box2D", reason='the Box2D envs need pip install "gymnasium[box2d]"')


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.mark.timeout(300)
def test_lunar_lander_run_evaluates_resumes_and_loads(tmp_path):
    run = tmp_path / "lander"
    out = invoke("train", "--set", "env.id=LunarLander-v3", "--set",
                 "train.total_env_steps=2048", "--run-dir", run)
    assert out.exit_code == 0, out.output
    ev = invoke("eval", run, "-n", 1, "--json")
    assert ev.exit_code == 0, ev.output
    assert json.loads(ev.output)["env_id"] == "LunarLander-v3"
    more = invoke("train", "--resume", run, "--set", "train.total_env_steps=4096")
    assert more.exit_code == 0, more.output
    assert load_checkpoint(RunDir(run).checkpoint_path)["counters"]["env_steps"] == 4096
    policy = hpcrl.load_policy(run)  # as the README uses it
    env = gym.make("LunarLander-v3")
    obs, _ = env.reset(seed=0)
    action = policy(torch.as_tensor(obs))
    assert env.action_space.contains(int(action))


@pytest.mark.parametrize("env_id", ["LunarLander-v3", "BipedalWalker-v3", "CarRacing-v3"])
def test_box2d_env_state_is_plain_and_restores_numpy_types(env_id):
    env, fresh = gym.make(env_id), gym.make(env_id)
    env.reset(seed=1)
    fresh.reset(seed=2)
    for _ in range(5):
        env.step(env.action_space.sample())
    states, missing = capture_env_state(env)
    assert missing  # the Box2D world itself is a simulator handle, reported as such
    assert unloadable_value(states) is None
    buffer = io.BytesIO()
    torch.save(states, buffer)
    buffer.seek(0)
    restore_env_state(fresh, torch.load(buffer, weights_only=True))
    for key, value in vars(env.unwrapped).items():
        if isinstance(value, (np.generic, np.ndarray)):
            assert type(getattr(fresh.unwrapped, key)) is type(value), key
