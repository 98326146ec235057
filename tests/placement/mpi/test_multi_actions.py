"""MultiDiscrete and MultiBinary actions: PPO learns them serially, saved policies act in
them, and the MPI presets carry them (tests/placement/mpi/hpcrl_testenvs.py: MatchTarget)."""
import json

import gymnasium as gym
import hpcrl_testenvs  # noqa: F401  registers the MatchTarget envs
import numpy as np
import pytest
import torch
from mpirun import column, train

import hpcrl
from hpcrl.config import from_dict
from hpcrl.models.distributions import CategoricalActions, MultiCategoricalActions
from hpcrl.placement.serial_run import Trainer
from hpcrl.runtime.run_dir import RunDir

ENVS = {"multi_discrete": "hpcrl_testenvs:MultiDiscreteMatch-v0",
        "multi_binary": "hpcrl_testenvs:MultiBinaryMatch-v0"}


def test_components_sample_and_score_as_independent_categoricals():
    dist = MultiCategoricalActions((3, 2))
    logits = torch.randn(5, 5)
    noise = torch.rand(5, 2)
    actions = dist.sample(logits, noise)
    parts = [CategoricalActions(3), CategoricalActions(2)]
    want = [parts[0].sample(logits[:, :3], noise[:, 0]),
            parts[1].sample(logits[:, 3:], noise[:, 1])]
    assert actions.tolist() == torch.stack(want, dim=-1).tolist()
    refs = [torch.distributions.Categorical(logits=logits[:, :3]),
            torch.distributions.Categorical(logits=logits[:, 3:])]
    log_prob, entropy = dist.log_prob_entropy(logits, actions)
    torch.testing.assert_close(log_prob, refs[0].log_prob(actions[:, 0]) +
                               refs[1].log_prob(actions[:, 1]))
    torch.testing.assert_close(entropy, refs[0].entropy() + refs[1].entropy())


@pytest.mark.timeout(300)
@pytest.mark.parametrize("kind", list(ENVS))
def test_ppo_learns_several_action_components_and_its_policy_acts_in_them(kind, tmp_path):
    sets = [f"env.id={ENVS[kind]}", "train.total_env_steps=12288", "train.tensorboard=false",
            "train.eval_episodes=10"]
    Trainer(from_dict({}, sets), RunDir(tmp_path), console=None).train()
    returns = column(tmp_path, "episode_return_mean")
    evaluated = json.loads((tmp_path / "eval.json").read_text())["mean_return"]
    assert evaluated >= 7.0 and np.mean(returns[-3:]) > np.mean(returns[:2]) + 2, returns
    policy = hpcrl.load_policy(tmp_path)
    env = gym.make(ENVS[kind])
    obs, _ = env.reset(seed=0)
    with torch.inference_mode():
        action = policy(obs).numpy()
    assert action.shape == env.action_space.shape
    assert env.action_space.contains(action.astype(env.action_space.dtype))


# DD-PPO runs the same on every run: 3.2 -> 7.3 in 8192 steps (the 1.5 asked, with room);
# IMPALA makes about 3.1 -> 5.1 in its 65536
@pytest.mark.timeout(240)
@pytest.mark.parametrize("preset,ranks,steps", [("ddppo", 2, 8192), ("impala", 3, 65536)])
def test_presets_carry_multi_discrete_actions(preset, ranks, steps, tmp_path):
    train(ranks, tmp_path, [f"scheme.preset={preset}", f"env.id={ENVS['multi_discrete']}",
                            f"train.total_env_steps={steps}", "env.num_envs=4"], timeout=200)
    returns = column(tmp_path, "episode_return_mean")
    assert np.mean(returns[-3:]) > np.mean(returns[:2]) + 1.5, returns
