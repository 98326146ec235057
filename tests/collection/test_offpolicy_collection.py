"""What the off-policy collectors store from Pendulum-v1, whose episodes only ever end at the
200-step time limit: actions in ``[-1, 1]`` that the env sees scaled to its ``[-2, 2]``
torques, and rows that bootstrap through the time limit from the episode's true final
observation (not the next episode's first one)."""
import numpy as np
import pytest

from hpcrl.algorithms import make_policy
from hpcrl.build import env_spaces
from hpcrl.collection.collector import transition_collector
from hpcrl.collection.transition_filler import TransitionSections, chunk_layout
from hpcrl.config import from_dict
from hpcrl.envs.vector import make_vector_env

STEPS = 250  # one whole episode and the start of the next


def pendulum_reward(obs: np.ndarray, torque: np.ndarray) -> np.ndarray:
    """Pendulum-v1's reward of acting with ``torque`` in the state that ``obs`` shows."""
    theta = np.arctan2(obs[:, 1], obs[:, 0])
    return -(theta ** 2 + 0.1 * obs[:, 2] ** 2 + 0.001 * torque ** 2)


def pendulum_next(obs: np.ndarray, torque: np.ndarray) -> np.ndarray:
    """Pendulum-v1's next observation (g = 10, m = l = 1, dt = 0.05)."""
    theta = np.arctan2(obs[1], obs[0])
    speed = np.clip(obs[2] + (15.0 * np.sin(theta) + 3.0 * torque) * 0.05, -8.0, 8.0)
    theta = theta + speed * 0.05
    return np.array([np.cos(theta), np.sin(theta), speed])


@pytest.mark.parametrize("algo", ["sac", "td3"])
def test_pendulum_rows_scale_actions_and_bootstrap_through_the_time_limit(algo):
    cfg = from_dict({}, [f"algo.name={algo}", "env.id=Pendulum-v1",
                         "replay.learning_starts=100", f"replay.train_freq={STEPS}",
                         f"algo.num_steps={STEPS}"])
    spaces = env_spaces(cfg)
    envs = make_vector_env(cfg.env, 1)
    sections = TransitionSections(cfg.env, cfg.replay, cfg.algo, cfg.train, cfg.seed)
    collector = transition_collector(envs, make_policy(cfg, spaces), sections)
    layout = chunk_layout(cfg.replay, cfg.algo, spaces.obs_shape, spaces.action_shape, 1)
    chunk = collector.collect(layout.new(), STEPS, job_env_steps=0)
    envs.close()
    k = chunk.count
    assert k == STEPS
    obs, actions, next_obs = chunk.obs[:k], chunk.actions[:k, 0], chunk.next_obs[:k]
    rewards, discounts = chunk.rewards[:k], chunk.discounts[:k]
    # stored actions are the policy's [-1, 1] ones; the warm-up draws cover the whole range
    assert np.all(np.abs(actions) <= 1.0)
    assert actions[:100].min() < -0.8 and actions[:100].max() > 0.8
    # the env was stepped with the actions scaled to its [-2, 2] torque bounds, and every
    # row's next_obs is the state that followed, the time-limit row's (199) included
    torques = 2.0 * actions
    np.testing.assert_allclose(rewards, pendulum_reward(obs, torques), rtol=1e-5, atol=1e-5)
    expected = np.stack([pendulum_next(o, u) for o, u in zip(obs, torques, strict=False)])
    np.testing.assert_allclose(next_obs, expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(next_obs[:199], obs[1:200])
    assert not np.allclose(next_obs[199], obs[200])  # obs[200] starts a new episode
    # a time limit is no termination: every row bootstraps with the full discount
    np.testing.assert_allclose(discounts, cfg.algo.gamma)
    returns, lengths = chunk.finished_episodes()
    assert lengths.tolist() == [200]
    np.testing.assert_allclose(returns, rewards[:200].sum(), rtol=1e-4)


def test_every_declared_exploration_has_its_collector_side():
    """The collectors explore by what ``Capabilities.exploration`` declares, read through
    one table: every value an algorithm may declare has its entry, and every built-in's
    declaration is one of them."""
    from typing import get_args, get_type_hints

    from hpcrl.algorithms import ALGORITHMS, algorithm_capabilities
    from hpcrl.algorithms.capabilities import Capabilities
    from hpcrl.collection.exploring import EXPLORATIONS

    declared = get_args(get_type_hints(Capabilities)["exploration"])
    assert set(declared) == set(EXPLORATIONS)
    for name in ALGORITHMS:
        assert algorithm_capabilities(name).exploration in EXPLORATIONS
