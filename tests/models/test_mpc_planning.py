"""MPC's parts on known problems: the planners find the optimum of a quadratic return, a
planning policy over a perfect model steers to its goal (batched over envs, candidates and
members), and the world model learns Pendulum's dynamics and reward from random play."""
from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np
import pytest
import torch

from hpcrl.envs.vector import spaces_of
from hpcrl.models.model_based.planners import Pddm, draw, make_planner
from hpcrl.models.model_based.planning_engine import PlanningEngine
from hpcrl.models.model_based.policy import PlanningPolicy
from hpcrl.sections.algorithm_keys import MpcConfig
from hpcrl.sections.schema import ActorConfig

TARGETS = torch.tensor([[[0.5, -0.3], [0.2, 0.7], [-0.6, 0.1]],
                        [[-0.4, 0.4], [0.0, -0.8], [0.3, 0.3]]])  # 2 envs, H=3, A=2


def quadratic_returns(sequences: torch.Tensor) -> torch.Tensor:
    """``-sum (a - target)^2`` of each env's candidates ``[B, C, H, A]``: its optimum is the
    env's own target sequence."""
    return -((sequences - TARGETS[:, None]) ** 2).sum(dim=(2, 3))


def plan_once(settings: MpcConfig, returns, mean: torch.Tensor, seed: int = 0):
    planner = make_planner(settings, mean.shape[-1])
    g = torch.Generator().manual_seed(seed)
    noise = torch.stack([draw(planner.noise, planner.noise_shape, g) for _ in mean])
    return planner, planner.plan(returns, mean, noise)


@pytest.mark.parametrize("settings, tolerance", [
    (MpcConfig(planner="cem", horizon=3, candidates=400, iterations=8, elites=40), 0.02),
    (MpcConfig(planner="pddm", horizon=3, candidates=400, iterations=8, gamma=20.0,
               beta=1.0, sample_std=0.2), 0.05),
], ids=["cem", "pddm"])
def test_iterative_planners_find_the_optimum_of_a_quadratic_per_env(settings, tolerance):
    _, (actions, plan) = plan_once(settings, quadratic_returns, torch.zeros(2, 3, 2))
    assert torch.allclose(plan, TARGETS, atol=tolerance), plan
    assert torch.equal(actions, plan[:, 0])


def test_random_shooting_picks_the_best_uniform_candidate():
    settings = MpcConfig(planner="rs", horizon=1, candidates=3000)
    targets = TARGETS[:, :1]

    def returns(sequences):
        return -((sequences - targets[:, None]) ** 2).sum(dim=(2, 3))

    planner, (actions, plan) = plan_once(settings, returns, torch.zeros(2, 1, 2))
    assert torch.allclose(actions, targets[:, 0], atol=0.1), actions
    # it is the best of the very candidates it drew
    g = torch.Generator().manual_seed(0)
    noise = torch.stack([draw("uniform", planner.noise_shape, g) for _ in range(2)])
    best = returns(noise * 2 - 1).max(dim=1).values
    assert torch.allclose(returns(plan[:, None]).squeeze(1), best)


def test_pddm_filters_its_noise_and_weighs_candidates_by_their_returns():
    settings = MpcConfig(planner="pddm", horizon=4, candidates=3, iterations=1, beta=0.25,
                         sample_std=2.0, gamma=0.5)
    planner = Pddm(settings, 1)
    u = torch.randn(1, 3, 4, 1)
    n, previous = torch.empty_like(u), torch.zeros(1, 3, 1)
    for t in range(4):
        previous = 0.25 * 2.0 * u[:, :, t] + 0.75 * previous
        n[:, :, t] = previous
    assert torch.allclose(planner.filtered(u), n)
    mean = torch.full((1, 4, 1), 0.1)
    sequences = (mean[:, None] + n).clamp(-1, 1)
    returns = torch.tensor([[1.0, -2.0, 0.5]])
    _, plan = planner.plan(lambda s: returns, mean, u[:, None])
    w = torch.exp(0.5 * (returns - returns.max()))
    assert torch.allclose(plan, (w[..., None, None] * sequences).sum(1) / w.sum(), atol=1e-6)
    # between env steps PDDM's plan moves on a step and repeats its last; CEM's ends at 0
    shifted = planner.shift(torch.arange(4.0).reshape(1, 4, 1))
    assert shifted.flatten().tolist() == [1.0, 2.0, 3.0, 3.0]
    cem = make_planner(dataclasses.replace(settings, planner="cem"), 1)
    assert cem.shift(torch.arange(4.0).reshape(1, 4, 1)).flatten().tolist() == [1, 2, 3, 0]


def point_policy(planner: str, **keys) -> PlanningPolicy:
    """A planning policy for a point ``x' = x + 0.5 a`` whose ensemble of 3 is that dynamics
    exactly (a linear model), rewarded ``-x'^2``."""
    spaces = spaces_of(gym.spaces.Box(-5, 5, (1,), np.float32),
                       gym.spaces.Box(-1, 1, (1,), np.float32), "point")
    settings = MpcConfig(planner=planner, ensemble_size=3, **keys)
    policy = PlanningPolicy(spaces, ActorConfig(hidden_sizes=[]), settings, 1.0,
                            lambda obs, actions, next_obs: -next_obs[:, 0] ** 2)
    head = policy.model.net.head
    with torch.no_grad():
        head.weight.zero_()
        head.bias.zero_()
        head.weight[:, 1, 0] = 0.5  # the change of x: 0.5 x the action (input 1)
    return policy


@pytest.mark.parametrize("planner, keys, tolerance", [
    ("cem", {"horizon": 4, "candidates": 200, "iterations": 5, "elites": 20}, 0.05),
    ("pddm", {"horizon": 4, "candidates": 200, "iterations": 10, "gamma": 50.0}, 0.1),
    ("rs", {"horizon": 2, "candidates": 2000}, 0.1),
])
def test_a_policy_over_a_perfect_model_steers_each_env_to_the_goal(planner, keys, tolerance):
    policy = point_policy(planner, **keys)
    obs = torch.tensor([[0.4], [-0.3], [2.0]])  # the last is too far for one step
    actions, state = policy(obs, policy.initial_state(3))
    assert torch.allclose(actions[:, 0], torch.tensor([-0.8, 0.6, -1.0]), atol=tolerance)
    assert state[:, -1].tolist() == [1.0, 1.0, 1.0]  # a step planned in each episode
    # a row plans the same alone as batched with others (its noise is its step's)
    alone = policy(obs[1:2], policy.initial_state(1))[0]
    assert torch.equal(alone, actions[1:2])



def test_a_collectors_envs_plan_the_same_in_groups_as_all_at_once():
    """scheme.env_groups cuts a collector's envs into groups that plan in turn: each env keeps
    its own plan and noise stream, so its actions, and its reset, do not depend on the
    grouping."""
    policy = point_policy("cem", horizon=4, candidates=50, iterations=2, elites=5)
    obs = np.array([[0.4], [-0.3], [2.0], [1.0]], np.float32)
    whole = PlanningEngine(policy, 7, 10, 4)
    halves = PlanningEngine(policy, 7, 10, 4, [slice(0, 2), slice(2, 4)])
    for step in range(3):
        at_once = whole.step(obs).actions
        for group, cols in enumerate(halves.groups):
            halves.submit(group, obs[cols])
        in_groups = np.concatenate([halves.result(g).actions for g in range(2)])
        np.testing.assert_array_equal(at_once, in_groups)
        if step == 0:  # env 3's episode ends: its plan starts afresh, in either form
            whole.reset(np.array([False, False, False, True]))
            halves.reset(np.array([False, True]), halves.groups[1])
            assert torch.equal(whole.state, halves.state)
            assert not halves.state[3].any() and halves.state[2].any()

def random_pendulum(steps: int, seed: int) -> dict[str, np.ndarray]:
    """Transitions of Pendulum-v1 under uniformly random torques."""
    env = gym.make("Pendulum-v1")
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    rows: dict[str, list] = {"obs": [], "actions": [], "rewards": [], "next_obs": []}
    for _ in range(steps):
        action = rng.uniform(-1, 1, 1).astype(np.float32)  # the policy's units
        next_obs, reward, terminated, truncated, _ = env.step(2.0 * action)
        for key, value in zip(rows, (obs, action, reward, next_obs), strict=True):
            rows[key].append(value)
        obs = env.reset()[0] if terminated or truncated else next_obs
    return {key: np.asarray(value, np.float32) for key, value in rows.items()}


def test_the_world_model_learns_pendulum_dynamics_and_reward_from_random_play():
    import hpcrl
    from hpcrl.algorithms import make_algorithm
    from hpcrl.buffers.replay.transitions import TransitionLayout
    from hpcrl.config import from_dict

    config = from_dict({}, ["algo.name=mpc", "env.id=Pendulum-v1", "algo.mpc.reward_fn=learned",
                            "replay.batch_size=128"])
    spaces = spaces_of(gym.spaces.Box(-8, 8, (3,), np.float32),
                       gym.spaces.Box(-2, 2, (1,), np.float32), "Pendulum-v1")
    mpc = make_algorithm(config, spaces)
    train, test = random_pendulum(2000, 0), random_pendulum(400, 1)
    chunk = TransitionLayout(2000, (3,), (1,)).new()
    chunk.append(train["obs"], train["actions"], train["rewards"], np.ones(2000, np.float32),
                 train["next_obs"])
    mpc.observe(chunk)  # the statistics of every transition the replay takes
    rng = np.random.default_rng(0)
    for _ in range(1500):
        rows = rng.integers(0, 2000, 128)
        batch = hpcrl.ReplayBatch(*(torch.from_numpy(train[k][rows])
                                    for k in ("obs", "actions", "rewards")),
                                  torch.ones(128), torch.from_numpy(train["next_obs"][rows]),
                                  None, rows)
        grads, _ = mpc.compute_gradients(batch)
        mpc.apply_gradients(grads)
    model = mpc.planning.model
    obs, actions = torch.from_numpy(test["obs"]), torch.from_numpy(test["actions"])
    with torch.no_grad():
        e = model.members
        next_obs, rewards = model.predict(obs.expand(e, -1, -1), actions.expand(e, -1, -1),
                                          model.scales())
    delta = test["next_obs"] - test["obs"]
    error = ((next_obs.mean(0).numpy() - test["next_obs"]) ** 2).mean(0) / delta.var(0)
    assert (error < 0.02).all(), error  # each feature's change: R^2 above 0.98
    reward_error = ((rewards.mean(0).numpy() - test["rewards"]) ** 2).mean() / test["rewards"].var()
    assert reward_error < 0.02, reward_error
