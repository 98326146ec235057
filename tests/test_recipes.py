"""Every recipe in examples/ loads as it is, takes any env of its family on top, and the
pixel recipes train end to end on a tiny budget (the env suites' recipes: MiniGrid's learns
in tests/envs/test_env_suites.py, DeepMind Control's trains and resumes there)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch
import yaml
from click.testing import CliRunner

from hpcrl.build import env_spaces, make_actor
from hpcrl.cli import main
from hpcrl.config.loader import load_config
from hpcrl.envs.suites.suite_ids import suite_of

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
sys.path.insert(0, str(EXAMPLES))  # custom_components.yaml's classes (PYTHONPATH=examples)
SAME_FAMILY = {
    "atari-ppo.yaml": "ALE/Breakout-v5", "atari-impala.yaml": "BreakoutNoFrameskip-v4",
    "atari-dqn.yaml": "ALE/SpaceInvaders-v5", "minatar-ppo.yaml": "MinAtar/SpaceInvaders-v1",
    "mujoco-ppo.yaml": "Hopper-v5", "mujoco-sac.yaml": "Walker2d-v5",
    "mpo-pendulum.yaml": "Hopper-v5", "ppo-rnd.yaml": "MountainCar-v0",
    "showcase-vizdoom.yaml": "VizdoomBasic-v1", "minigrid-ppo.yaml": "MiniGrid-Empty-8x8-v0",
    "crafter-ppo.yaml": "CrafterNoReward-v1", "dmc-sac.yaml": "dm_control/walker-walk-v0",
}


def skip_without_its_suite(recipe: str) -> None:
    """Skip, naming the extra, a recipe whose env suite is not installed here (the [test]
    extra leaves out the heavy ones: DeepMind Control)."""
    env_id = (yaml.safe_load((EXAMPLES / recipe).read_text()).get("env") or {}).get("id", "")
    found = suite_of(env_id)
    if found and not all(importlib.util.find_spec(m) for m in found[0].modules):
        pytest.skip(f"needs {found[0].install}")


@pytest.mark.parametrize("recipe", sorted(p.name for p in EXAMPLES.glob("*.yaml")))
def test_recipe_loads_as_it_is(recipe):
    skip_without_its_suite(recipe)
    cfg = load_config(EXAMPLES / recipe)
    assert cfg.train.total_env_steps > 0


@pytest.mark.parametrize("recipe, env_id", sorted(SAME_FAMILY.items()))
def test_any_env_of_the_family_goes_on_top_of_a_pixel_or_mujoco_recipe(recipe, env_id):
    skip_without_its_suite(recipe)
    cfg = load_config(EXAMPLES / recipe, [f"env.id={env_id}"])
    spaces = env_spaces(cfg)
    if cfg.algo.name in ("ppo", "a2c", "impala"):
        actor = make_actor(cfg, spaces)
        obs = torch.zeros((2,) + spaces.obs_shape, dtype=getattr(torch, spaces.obs_format.dtype))
        out = actor(obs)  # a recurrent actor gives (actions, state)
        assert (out[0] if isinstance(out, tuple) else out).shape[0] == 2


@pytest.mark.timeout(300)
def test_minatar_recipe_trains_from_the_cli(tmp_path):
    out = CliRunner().invoke(main, [
        "train", str(EXAMPLES / "minatar-ppo.yaml"), "--run-dir", str(tmp_path / "run"),
        "--set", "train.total_env_steps=2048", "--set", "train.eval_episodes=1",
        "--set", "train.tensorboard=false"], catch_exceptions=False)
    assert out.exit_code == 0, out.output


@pytest.mark.timeout(300)
def test_crafter_recipe_trains_from_the_cli(tmp_path):
    skip_without_its_suite("crafter-ppo.yaml")
    out = CliRunner().invoke(main, [
        "train", str(EXAMPLES / "crafter-ppo.yaml"), "--run-dir", str(tmp_path / "run"),
        "--set", "train.total_env_steps=2048", "--set", "train.eval_episodes=1",
        "--set", "train.eval_max_episode_steps=200", "--set", "train.tensorboard=false",
        # a 32x32 world: 4x less to generate at each reset (1.6 s for 64x64 without numba)
        "--set", "env.kwargs={area: [32, 32]}"],
        catch_exceptions=False)
    assert out.exit_code == 0, out.output
