"""The off-policy learners' mechanics: per-segment steps, target updates, loss isolation,
numpy engines, fused Adam."""
import numpy as np
import pytest
import torch

from hpcrl.algorithms import make_algorithm, make_policy
from hpcrl.build import env_spaces
from hpcrl.config import from_dict
from hpcrl.learning.replay_learner import make_replay
from hpcrl.models.acting import make_engine
from hpcrl.models.critics import EnsembleCritic
from hpcrl.numerics.optim import FlatAdam, FusedFlatAdam

SMALL = ["actor.hidden_sizes=[16,16]", "actor.activation=relu", "replay.batch_size=8",
         "algo.max_grad_norm=0", "algo.lr_schedule=constant"]


def setup(algo, env, *extra):
    cfg = from_dict({}, [f"algo.name={algo}", f"env.id={env}", *SMALL, *extra])
    spaces = env_spaces(cfg)
    alg = make_algorithm(cfg, spaces)
    replay = make_replay(cfg.replay, cfg.seed, cfg.algo.gamma, cfg.env, spaces.obs_shape,
                         spaces.action_shape, spaces.discrete)
    rng = np.random.default_rng(0)
    n, obs_dim = 64, spaces.obs_shape[0]
    if spaces.discrete:
        actions = rng.integers(0, spaces.action_space.n, n).astype(np.float32)
    else:
        actions = rng.uniform(-1, 1, (n,) + spaces.action_shape).astype(np.float32)
    replay.add_rows(rng.standard_normal((n, obs_dim)).astype(np.float32), actions,
                    rng.standard_normal(n).astype(np.float32), np.full(n, 0.9, np.float32),
                    rng.standard_normal((n, obs_dim)).astype(np.float32))
    return cfg, alg, replay


def step(alg, replay):
    grads, stats = alg.compute_gradients(replay.sample(8))
    return grads.clone(), stats, alg.apply_gradients(grads)


def test_td3_policy_gets_neither_gradient_nor_adam_step_between_delays():
    _, alg, replay = setup("td3", "Pendulum-v1", "algo.td3.policy_delay=3")
    policy_before = alg.segment_params("policy").clone()
    target_before = alg.targets["critic"].flat.clone()
    for k in (1, 2):
        grads, stats, _ = step(alg, replay)
        assert torch.count_nonzero(grads[alg.segments["policy"].slice]) == 0
        assert "policy_loss" not in stats
        assert torch.equal(alg.segment_params("policy"), policy_before), k
        assert torch.equal(alg.targets["critic"].flat, target_before)  # targets wait too
    assert "policy" not in alg.optimizers or alg.optimizers["policy"].steps == 0
    grads, stats, _ = step(alg, replay)  # step 3: the delayed policy update
    assert torch.count_nonzero(grads[alg.segments["policy"].slice]) > 0
    assert "policy_loss" in stats and alg.optimizers["policy"].steps == 1
    assert alg.optimizers["critic"].steps == 3
    assert not torch.equal(alg.segment_params("policy"), policy_before)
    assert not torch.equal(alg.targets["critic"].flat, target_before)


def test_dqn_hard_target_update_every_interval_exactly():
    _, alg, replay = setup("dqn", "CartPole-v1", "replay.target_update_interval=3",
                           "replay.tau=1.0")
    target = alg.targets["q"]
    start = target.flat.clone()
    for k in range(1, 7):
        step(alg, replay)
        if k % 3 == 0:
            assert torch.equal(target.flat, alg.segment_params("q")), k
        else:
            assert not torch.equal(target.flat, alg.segment_params("q")), k
        if k < 3:
            assert torch.equal(target.flat, start)


def test_polyak_averaging_moves_targets_by_tau():
    _, alg, replay = setup("sac", "Pendulum-v1", "replay.tau=0.25")
    before = alg.targets["critic"].flat.clone()
    step(alg, replay)
    expected = before + 0.25 * (alg.segment_params("critic") - before)
    torch.testing.assert_close(alg.targets["critic"].flat, expected)


def gradients_and_draws(alg, replay):
    """A batch, the gradient of one step on it (and its loss terms), and a generator that
    replays the learner's random draws of that step, for recomputing the loss by hand."""
    batch = replay.sample(8)
    state = alg.generator.get_state()
    grads, stats = alg.compute_gradients(batch)
    gen = torch.Generator()
    gen.set_state(state)
    return batch, grads.clone(), stats, gen


def test_sac_segments_get_only_their_own_loss_gradient():
    cfg, alg, replay = setup("sac", "Pendulum-v1")
    batch, grads, _, gen = gradients_and_draws(alg, replay)
    noise, next_noise = torch.randn(8, 1, generator=gen), torch.randn(8, 1, generator=gen)
    pi, critic, target = alg.pi, alg.critic, alg.targets["critic"].module
    alpha = alg.log_alpha.value.detach().exp()
    with torch.no_grad():
        next_a, next_logp = pi.sample(batch.next_obs, next_noise)
        y = batch.rewards + batch.discounts * (target(batch.next_obs, next_a).min(0).values
                                               - alpha * next_logp)
    critic_loss = 0.5 * (critic(batch.obs, batch.actions) - y).pow(2).mean(1).sum()
    expected_critic = torch.autograd.grad(critic_loss, list(critic.parameters()))
    a_pi, logp = pi.sample(batch.obs, noise)
    q_pi = torch.stack([critic(batch.obs, a_pi)[k] for k in range(2)]).min(0).values
    policy_loss = (alpha * logp - q_pi).mean()
    expected_policy = torch.autograd.grad(policy_loss, list(pi.parameters()))
    def flat(gs):
        return torch.cat([g.reshape(-1) for g in gs])
    torch.testing.assert_close(grads[alg.segments["critic"].slice], flat(expected_critic))
    torch.testing.assert_close(grads[alg.segments["policy"].slice], flat(expected_policy))
    expected_alpha = -(logp.detach() + alg.target_entropy).mean()
    torch.testing.assert_close(grads[alg.segments["log_alpha"].slice][0], expected_alpha)


def test_frozen_critic_passes_gradients_to_actions_only():
    cfg = from_dict({}, ["actor.hidden_sizes=[8]"])
    critic = EnsembleCritic(3, 2, cfg.actor, 2)
    actions = torch.zeros(4, 2, requires_grad=True)
    critic(torch.randn(4, 3), actions, frozen=True).sum().backward()
    assert all(p.grad is None for p in critic.parameters())
    assert actions.grad.abs().sum() > 0
    one = critic(torch.ones(2, 3), torch.ones(2, 2), members=1)
    assert one.shape == (1, 2)
    torch.testing.assert_close(one[0], critic(torch.ones(2, 3), torch.ones(2, 2))[0])


@pytest.mark.parametrize("algo, env", [("dqn", "CartPole-v1"), ("sac", "Pendulum-v1"),
                                       ("td3", "Pendulum-v1")])
def test_numpy_engines_match_the_torch_policies(algo, env):
    cfg = from_dict({}, [f"algo.name={algo}", f"env.id={env}", "actor.activation=tanh"])
    spaces = env_spaces(cfg)
    policy = make_policy(cfg, spaces)
    perturb = torch.Generator().manual_seed(0)  # the same weights whatever ran before
    with torch.no_grad():
        for p in policy.parameters():
            p.add_(torch.randn(p.shape, generator=perturb) * 0.3)
    engine = make_engine(policy)
    obs = np.random.default_rng(0).standard_normal((32,) + spaces.obs_shape).astype(np.float32)
    with torch.no_grad():
        if algo == "dqn":
            greedy = policy(torch.from_numpy(obs)).numpy()
            np.testing.assert_array_equal(engine.step(obs).actions, greedy)
            return
        mode = policy.squashed_mode(torch.from_numpy(obs)).numpy()
        np.testing.assert_allclose(engine.step(obs).actions, mode, rtol=1e-5, atol=1e-6)
        env_action = policy(torch.from_numpy(obs)).numpy()
        np.testing.assert_allclose(env_action, policy.scale.to_env(mode), rtol=1e-5, atol=1e-6)
        if algo == "sac":
            noise = np.random.default_rng(1).standard_normal((32, 1)).astype(np.float32)
            sampled, _ = policy.sample(torch.from_numpy(obs), torch.from_numpy(noise))
            np.testing.assert_allclose(engine.step(obs, noise).actions, sampled.numpy(), rtol=1e-5,
                                       atol=1e-6)


def test_squashed_gaussian_log_prob_matches_torch_distributions():
    cfg = from_dict({}, ["algo.name=sac", "env.id=Pendulum-v1"])
    policy = make_policy(cfg, env_spaces(cfg))
    obs, noise = torch.randn(16, 3), torch.randn(16, 1)
    actions, log_prob = policy.sample(obs, noise)
    mean, log_std = policy.mean_log_std(obs)
    u = mean + log_std.exp() * noise
    ref = torch.distributions.Normal(mean, log_std.exp()).log_prob(u).sum(-1)
    ref = ref - torch.log(1 - torch.tanh(u) ** 2 + 1e-6).sum(-1)
    torch.testing.assert_close(log_prob, ref)
    torch.testing.assert_close(actions, torch.tanh(u))


def test_fused_flat_adam_matches_flat_adam_and_its_state():
    torch.manual_seed(0)
    a_params, b_params = torch.randn(300), None
    b_params = a_params.clone()
    a, b = FlatAdam(300, eps=1e-8), FusedFlatAdam(300, eps=1e-8)
    for _ in range(30):
        g = torch.randn(300)
        a.step(a_params, g, 3e-3)
        b.step(b_params, g, 3e-3)
    torch.testing.assert_close(a_params, b_params, rtol=1e-5, atol=1e-6)
    state = b.state_dict()
    assert state["kind"] == "adam" and state["steps"] == 30
    c = FlatAdam(300, eps=1e-8)
    c.load_state_dict(state)  # interchangeable state
    torch.testing.assert_close(c.exp_avg_sq, a.exp_avg_sq, rtol=1e-5, atol=1e-9)
