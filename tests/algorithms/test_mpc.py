"""MPC as a user meets it: `hpcrl train --set algo.name=mpc` learns Pendulum-v1 with each
planner, the run evaluates and loads, the reward comes from where algo.mpc.reward_fn says,
and what it cannot do is refused before any work, naming the fix."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from refusal_checks import refused_in_process

import hpcrl
from hpcrl.algorithms import make_policy
from hpcrl.build import env_spaces
from hpcrl.cli import main
from hpcrl.config import from_dict
from hpcrl.models.model_based import rewards

RECIPE = Path(__file__).resolve().parents[2] / "examples" / "mpc-pendulum.yaml"
# the recipe with a smaller model and planner: about 15 ms of CPU an env step, not 70
FAST = ["algo.mpc.ensemble_size=3", "actor.hidden_sizes=[32,32]", "algo.mpc.candidates=100",
        "algo.mpc.horizon=15", "replay.gradient_steps=4"]


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def sets(*items: str) -> list[str]:
    return [x for item in items for x in ("--set", item)]


@pytest.mark.timeout(240)
@pytest.mark.parametrize("planner", ["cem", "pddm", "rs"])
def test_mpc_learns_pendulum_with_each_planner_in_800_steps(tmp_path, planner):
    """The recipe made smaller, its planner swapped: from 200 random steps, three episodes of
    planning over the model learnt so far swing the pendulum up (random play scores about
    -1200; a swing-up from hanging down costs about -300, the best policies -150 on
    average). The CEM run is also evaluated during training, by `hpcrl eval` and loaded as a
    policy."""
    run = tmp_path / "run"
    out = invoke("train", RECIPE, "--run-dir", run,
                 *sets(f"algo.mpc.planner={planner}", "train.total_env_steps=800",
                       "train.eval_episodes=2", "train.tensorboard=false",
                       *(["train.eval_every=400"] if planner == "cem" else []), *FAST))
    assert out.exit_code == 0, out.output
    rows = (run / "progress.csv").read_text().splitlines()
    header = rows[0].split(",")
    assert {"model_loss", "dynamics_mse"} <= set(header)
    returns = [float(r.split(",")[header.index("episode_return_mean")]) for r in rows[1:]]
    assert returns[-1] > returns[0] + 300, returns  # the training episodes improve
    assert json.loads((run / "eval.json").read_text())["mean_return"] > -600
    if planner == "cem":
        assert_evaluates_and_loads(run)


def assert_evaluates_and_loads(run: Path) -> None:
    """The trained run was evaluated during training, `hpcrl eval` scores it the same twice
    (the planning noise comes from the steps' seeds), and it loads as a policy that plans
    with the trained model."""
    assert len((run / "eval.csv").read_text().splitlines()) == 3  # at 400 and 800 steps
    result = json.loads(invoke("eval", run, "--episodes", 1, "--json").output)
    assert result["episodes"] == 1 and len(result["returns"]) == 1
    again = json.loads(invoke("eval", run, "--episodes", 1, "--json").output)
    assert again["returns"] == result["returns"]
    policy = hpcrl.load_policy(run)
    action = policy(torch.zeros(3))
    assert action.shape == (1,) and -2.0 <= float(action) <= 2.0
    assert policy(torch.zeros(5, 3)).shape == (5, 1)
    # the model it plans with is the trained one, with the replay's statistics
    assert float(policy.model.inputs.count) > 700


@pytest.mark.parametrize("spec, expected", [
    ("auto", "HookedPoint.planning_reward"),  # the env's own method
    ("hpcrl_model_envs:point_reward", "point_reward"),
    ("learned", None),
])
def test_the_planning_reward_comes_from_where_reward_fn_says(spec, expected):
    config = from_dict({}, ["algo.name=mpc", "env.id=hpcrl_model_envs:HookedPoint-v0",
                            f"algo.mpc.reward_fn={spec}"])
    policy = make_policy(config, env_spaces(config))
    assert getattr(policy.reward, "__qualname__", None) == expected
    assert copy.deepcopy(policy).reward is policy.reward  # a snapshot does not copy the env
    assert policy.model.learned_reward == (expected is None)  # the reward head, only then
    pendulum = from_dict({}, ["algo.name=mpc", "env.id=Pendulum-v1"])
    assert make_policy(pendulum, env_spaces(pendulum)).reward is rewards.pendulum


def test_pendulums_built_in_reward_is_the_envs_own():
    import gymnasium as gym

    env = gym.make("Pendulum-v1")
    obs, _ = env.reset(seed=3)
    rng = np.random.default_rng(0)
    for _ in range(50):
        action = rng.uniform(-2.5, 2.5, 1).astype(np.float32)  # beyond the bound: clipped
        next_obs, reward, *_ = env.step(action)
        mine = rewards.pendulum(torch.tensor(obs[None]), torch.tensor(action[None]),
                                torch.tensor(next_obs[None]))
        assert float(mine) == pytest.approx(reward, abs=1e-4)
        obs = next_obs


@pytest.mark.parametrize("items, words", [
    (["env.id=CartPole-v1"], ["mpc needs a Box action space", "use dqn for discrete"]),
    (["env.id=hpcrl_model_envs:PixelPoint-v0"],
     ["predicts the next observation", "observes images", "one of ppo, a2c, impala, dqn"]),
    (["env.id=Pendulum-v1", "actor.encoder=nature_cnn", "actor.hidden_sizes=[]"],
     ["'actor.encoder' (nature_cnn)", "use actor.encoder=mlp"]),
    (["env.id=Pendulum-v1", "replay.n_step=3"], ["replay.n_step=1"]),
    (["env.id=Pendulum-v1", "replay.prioritized=true"], ["replay.prioritized=false"]),
    (["env.id=Pendulum-v1", "replay.tau=0.1"],
     ["'replay.tau' is read by the target networks of", "mpc keeps none"]),
    (["env.id=Pendulum-v1", "algo.mpc.elites=10", "algo.mpc.planner=pddm"],
     ["'algo.mpc.elites' is read by algo.mpc.planner=cem only"]),
    (["env.id=Pendulum-v1", "algo.mpc.planner=rs", "algo.mpc.iterations=5"],
     ["'algo.mpc.iterations' is read by algo.mpc.planner=cem or pddm only"]),
    (["env.id=Pendulum-v1", "algo.mpc.elites=500"], ["must not exceed algo.mpc.candidates"]),
    (["env.id=Pendulum-v1", "algo.mpc.reward_fn=nowhere"], ["'auto', 'learned' or"]),
    (["env.id=Pendulum-v1", "algo.mpc.reward_fn=hpcrl_model_envs:absent"],
     ["has no attribute 'absent'"]),
    (["env.id=hpcrl_model_envs:HookedPoint-v0",
      "algo.mpc.reward_fn=hpcrl_model_envs:wrong_shape_reward"],
     ["returned (2, 2) for a batch of 2", "one reward per row"]),
    (["env.id=Pendulum-v1", "scheme.preset=async-sac", "scheme.inference_ranks=1"],
     ["'scheme.inference_ranks' (1)", "set scheme.inference_ranks=0"]),
])
def test_what_mpc_cannot_do_is_refused_before_any_work(tmp_path, items, words):
    run = tmp_path / "run"
    refused_in_process("train", "--run-dir", str(run), *sets("algo.name=mpc", *items),
                       needles=tuple(words))
    assert not run.exists()
