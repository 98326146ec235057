"""Ape-X pieces and the presets of named architectures: agent defaults, refusals, the plan,
per-collector epsilon and the collectors' initial priorities."""
import json

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from hpcrl.algorithms import make_policy
from hpcrl.buffers.replay import PrioritizedReplayBuffer
from hpcrl.build import env_spaces
from hpcrl.cli import main
from hpcrl.collection.collector import transition_collector
from hpcrl.collection.transition_filler import TransitionSections, chunk_layout
from hpcrl.config import ConfigError, from_dict
from hpcrl.envs.vector import make_vector_env
from hpcrl.models.acting import make_engine
from hpcrl.models.epsilon import collector_epsilon

APEX_SMALL = ["scheme.preset=apex", "actor.hidden_sizes=[16]", "env.num_envs=4",
              "replay.learning_starts=0", "replay.train_freq=8", "replay.n_step=1"]


def test_presets_bring_their_agent_and_explicit_keys_win():
    apex = from_dict({"scheme": {"preset": "apex"}})
    assert (apex.algo.name, apex.replay.prioritized, apex.replay.n_step) == ("dqn", True, 3)
    assert apex.algo.dqn.per_collector_eps and apex.algo.dqn.initial_priorities == "collector"
    # collectors stream 256-step chunks; the rest is DQN's defaults, not PPO's
    assert (apex.algo.num_steps, apex.algo.gamma, apex.replay.batch_size) == (256, 0.99, 64)
    assert from_dict({}, ["scheme.preset=impala"]).algo.name == "impala"
    assert from_dict({}, ["scheme.preset=async-sac", "env.id=Pendulum-v1"]).algo.name == "sac"
    mine = from_dict({"scheme": {"preset": "apex"}, "replay": {"n_step": 5}},
                     ["algo.name=td3", "env.id=Pendulum-v1", "algo.dqn.per_collector_eps=false",
                      "algo.dqn.initial_priorities=max"])
    assert (mine.algo.name, mine.replay.n_step, mine.replay.prioritized) == ("td3", 5, True)
    assert from_dict({}).algo.dqn.per_collector_eps is False  # serial default untouched
    # another algorithm on Ape-X's layout takes its replay, not DQN's own keys
    sac = from_dict({}, ["scheme.preset=apex", "algo.name=sac", "env.id=Pendulum-v1"])
    assert sac.replay.prioritized and sac.algo.dqn == type(sac.algo.dqn)()


@pytest.mark.parametrize("sets, message", [
    (["scheme.preset=impala", "algo.name=ppo"], "scheme.preset=async-ppo"),
    (["scheme.preset=apex", "algo.name=a2c"], "needs an off-policy algorithm"),
    (["scheme.preset=apex", "algo.name=sac", "env.id=Pendulum-v1",
      "algo.dqn.initial_priorities=collector"],
     "'algo.dqn.initial_priorities' is read by dqn"),
    (["scheme.preset=apex", "replay.prioritized=false"], "set algo.dqn.initial_priorities=max"),
    (["scheme.preset=ddppo", "algo.name=dqn"], "set scheme.gradient_workers=1"),
    (["scheme.preset=a2c", "algo.name=dqn"], "set scheme.collection=async"),
    (["scheme.preset=apex", "scheme.update=central", "scheme.gradients=async"],
     "set scheme.update=decentralized"),
    (["scheme.preset=apex", "replay.ratio_tolerance=-2"], "replay.ratio_tolerance"),
])
def test_offpolicy_schemes_that_cannot_work_are_refused_with_the_fix(sets, message):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        from_dict({}, sets)


def test_collector_epsilons_follow_the_apex_schedule():
    assert collector_epsilon(0, 1, 0.4, 7.0) == 0.4
    eps = [collector_epsilon(i, 4, 0.4, 7.0) for i in range(4)]
    np.testing.assert_allclose(eps, [0.4 ** (1 + 7 * i / 3) for i in range(4)])
    assert eps == sorted(eps, reverse=True)


def test_plan_shows_the_agent_and_each_collectors_epsilon():
    out = CliRunner().invoke(main, ["plan", "--json", "--set", "scheme.preset=apex",
                                    "--set", "scheme.collectors_per_worker=3"])
    assert out.exit_code == 0, out.output
    plan = json.loads(out.output)
    assert "prioritised replay (priorities from the collectors)" in plan["agent"]
    eps = [r["epsilon"] for r in plan["ranks"] if r["role"] == "collector"]
    np.testing.assert_allclose(eps, [0.4, 0.4 ** 4.5, 0.4 ** 8])
    text = CliRunner().invoke(main, ["plan", "--set", "scheme.preset=impala"]).output
    assert "agent: impala with V-trace targets" in text


def collector(sets, index=0, count=1):
    cfg = from_dict({}, APEX_SMALL + sets)
    spaces = env_spaces(cfg)
    envs = make_vector_env(cfg.env, cfg.env.num_envs)
    policy = make_policy(cfg, spaces)
    sections = TransitionSections(cfg.env, cfg.replay, cfg.algo, cfg.train, cfg.seed)
    c = transition_collector(envs, policy, sections, collector_index=index, collector_count=count)
    chunk = chunk_layout(cfg.replay, cfg.algo, spaces.obs_shape, spaces.action_shape,
                         cfg.env.num_envs).new()
    return cfg, c, chunk, policy


def test_each_collector_explores_with_its_own_fixed_epsilon():
    _, random_one, chunk, _ = collector(["algo.dqn.collector_eps_base=1.0"])
    random_one.collect(chunk, 8, job_env_steps=0)
    greedy = make_engine(random_one.filler.policy).step(chunk.obs[:chunk.count]).actions
    same_random = np.mean(chunk.actions[:chunk.count] == greedy)
    assert 0.2 < same_random < 0.8  # epsilon 1: actions ignore the Q-network
    _, last, chunk, _ = collector(["algo.dqn.collector_eps_base=0.01"], index=3, count=4)
    assert last.filler.exploration.fixed_eps == pytest.approx(0.01 ** 8)
    last.collect(chunk, 8, job_env_steps=0)
    greedy = make_engine(last.filler.policy).step(chunk.obs[:chunk.count]).actions
    np.testing.assert_array_equal(chunk.actions[:chunk.count], greedy)


def test_collector_priorities_are_the_td_errors_of_its_q_network():
    cfg, c, chunk, policy = collector(["replay.n_step=3", "algo.gamma=0.9"])
    c.collect(chunk, 8, job_env_steps=0)
    k = chunk.count
    assert k > 0 and chunk.layout.priorities
    with torch.no_grad():
        q = policy.q_values(torch.from_numpy(chunk.obs[:k]))
        taken = q.gather(1, torch.from_numpy(chunk.actions[:k]).long().unsqueeze(1)).squeeze(1)
        best = policy.q_values(torch.from_numpy(chunk.next_obs[:k])).max(dim=1).values
        target = torch.from_numpy(chunk.rewards[:k]) + torch.from_numpy(chunk.discounts[:k]) * best
    np.testing.assert_allclose(chunk.priorities[:k], (target - taken).abs().numpy(), rtol=1e-4,
                               atol=1e-5)

    replay = PrioritizedReplayBuffer(100, (4,), (), True, seed=0, alpha=0.6, eps=1e-6)
    rows = replay.add(chunk)
    np.testing.assert_allclose(replay.tree.get(rows), (chunk.priorities[:k] + 1e-6) ** 0.6,
                               rtol=1e-6)
