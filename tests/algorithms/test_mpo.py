"""MPO: the E-step's dual keeps the improved policy at its KL bound, the decoupled trust
regions are the Gaussians' KLs, each segment gets only its own loss's gradient (one draw of
target-policy actions at the next states serving the TD targets and both steps), the duals
step with their own learning rate, and the critics value many sampled actions as they value
one."""
import math

import pytest
import torch
import torch.nn.functional as F
from test_offpolicy_algorithms import gradients_and_draws
from test_offpolicy_algorithms import setup as offpolicy_setup
from torch.distributions import Normal, kl_divergence

from hpcrl.algorithms import MPO, action_space_problem, make_policy
from hpcrl.algorithms.mpo.maximum_a_posteriori import decoupled_kl, temperature_loss
from hpcrl.build import env_spaces
from hpcrl.config import ConfigError, load_config
from hpcrl.models.continuous_policies import SquashedGaussianPolicy


def test_the_temperature_dual_keeps_the_improved_policy_at_its_kl_bound():
    """At the dual's minimum over the temperature, KL(weights || target's samples) = eps:
    the E-step's constraint, which the temperature is there to enforce."""
    torch.manual_seed(0)
    q = torch.randn(50, 32) * 3.0  # 50 sampled actions for each of 32 states
    epsilon = 0.1
    grid = torch.logspace(-2, 2, 4000)
    duals = torch.stack([temperature_loss(q, t.reshape(1), epsilon)[0] for t in grid])
    best = grid[int(duals.argmin())].reshape(1)
    _, weights = temperature_loss(q, best, epsilon)
    kl = (weights * (weights * q.shape[0]).log()).sum(dim=0).mean()  # vs uniform samples
    assert abs(float(kl) - epsilon) < 0.02, float(kl)
    assert torch.allclose(weights.sum(dim=0), torch.ones(32))
    assert torch.equal(weights, torch.softmax(q / best, dim=0))


def test_decoupled_kls_are_the_gaussians_kls_of_the_mean_and_the_std_moves():
    torch.manual_seed(1)
    mean_t, mean = torch.randn(7, 2), torch.randn(7, 2)
    std_t, std = torch.rand(7, 2) + 0.2, torch.rand(7, 2) + 0.2
    kl_mean, kl_std = decoupled_kl(mean_t, std_t, mean, std)
    target = Normal(mean_t, std_t)
    torch.testing.assert_close(kl_mean, kl_divergence(target, Normal(mean, std_t)).mean(0))
    torch.testing.assert_close(kl_std, kl_divergence(target, Normal(mean_t, std)).mean(0))


def setup(*extra):
    return offpolicy_setup("mpo", "Pendulum-v1", "algo.mpo.action_samples=6", *extra)


def test_each_segment_gets_only_its_own_losss_gradient():
    cfg, alg, replay = setup()
    assert isinstance(alg, MPO) and list(alg.segments) == ["policy", "critic", "duals"]
    batch, grads, stats, gen = gradients_and_draws(alg, replay)
    r, n = cfg.algo.mpo, cfg.algo.mpo.action_samples
    pi_t = alg.targets["policy"].module
    critic_t = alg.targets["critic"].module

    def target_q(obs, actions):
        rows = obs.unsqueeze(0).expand(n, *obs.shape).reshape(n * 8, -1)
        return critic_t(rows, actions.reshape(n * 8, -1)).min(0).values.reshape(n, 8)

    with torch.no_grad():  # the same draw as the algorithm's, at the next states, valued
        mean_t, log_std_t = pi_t.mean_log_std(batch.next_obs)  # once for both steps
        u = mean_t + log_std_t.exp() * torch.randn((n, 8, 1), generator=gen)
        q = target_q(batch.next_obs, torch.tanh(u))
        y = batch.rewards + batch.discounts * q.mean(0)
    critic_loss = 0.5 * (alg.critic(batch.obs, batch.actions) - y).pow(2).mean(1).sum()
    expected_critic = torch.autograd.grad(critic_loss, list(alg.critic.parameters()))
    def flat(gs):
        return torch.cat([g.reshape(-1) for g in gs])
    torch.testing.assert_close(grads[alg.segments["critic"].slice], flat(expected_critic))
    # the duals: d/d raw of softplus(raw) * (eps - KL) is sigmoid(raw) * (eps - KL)
    duals = alg.duals
    kl_mean, kl_std = stats["kl_mean"], stats["kl_std"]  # one action dimension: the means
    g = grads[alg.segments["duals"].slice]
    sig = torch.sigmoid
    torch.testing.assert_close(g[1], sig(duals.raw_alpha_mean)[0] * (r.epsilon_mean - kl_mean))
    torch.testing.assert_close(g[2], sig(duals.raw_alpha_std)[0] * (r.epsilon_std - kl_std))
    eta = (F.softplus(duals.raw_temperature) + 1e-8).detach().requires_grad_(True)
    dual = eta * (r.epsilon + (torch.logsumexp(q / eta, 0) - math.log(n)).mean())
    (d_eta,) = torch.autograd.grad(dual, [eta])
    torch.testing.assert_close(g[0], d_eta[0] * sig(duals.raw_temperature)[0])
    # the policy: the weighted fits under their trust regions, no critic in its gradient
    weights = torch.softmax(q / eta.detach(), 0)
    mean, log_std = alg.pi.mean_log_std(batch.next_obs)
    std, std_t = log_std.exp(), log_std_t.exp()
    fit = (weights * (Normal(mean, std_t).log_prob(u).sum(-1)
                      + Normal(mean_t, std).log_prob(u).sum(-1))).sum(0).mean()
    kl_m, kl_s = decoupled_kl(mean_t, std_t, mean, std)
    alpha_mean = F.softplus(duals.raw_alpha_mean).detach() + 1e-8
    alpha_std = F.softplus(duals.raw_alpha_std).detach() + 1e-8
    policy_loss = -fit + (alpha_mean * kl_m).sum() + (alpha_std * kl_s).sum()
    expected_policy = torch.autograd.grad(policy_loss, list(alg.pi.parameters()))
    torch.testing.assert_close(grads[alg.segments["policy"].slice], flat(expected_policy))


def test_the_duals_step_with_their_own_learning_rate():
    _, alg, replay = setup("algo.lr=1e-4",
                           "algo.mpo.dual_lr=0.05")
    before = alg.flat.detach().clone()
    grads, _ = alg.compute_gradients(replay.sample(8))
    alg.apply_gradients(grads.clone())
    moved = (alg.flat.detach() - before).abs()
    duals, policy = alg.segments["duals"].slice, alg.segments["policy"].slice
    # Adam's first step moves every weight by about its learning rate
    assert torch.allclose(moved[duals], torch.full_like(moved[duals], 0.05), rtol=0.01)
    assert float(moved[policy].max()) <= 1e-4 * 1.01


def test_mpo_acts_with_a_squashed_gaussian_and_refuses_what_it_cannot_take():
    cfg = load_config(None, ["algo.name=mpo", "env.id=Pendulum-v1"])
    assert isinstance(make_policy(cfg, env_spaces(cfg)), SquashedGaussianPolicy)
    assert cfg.actor.hidden_sizes == [256, 256] and cfg.algo.lr == 3e-4  # its defaults
    with pytest.raises(ConfigError, match="algo.mpo.epsilon_mean"):
        load_config(None, ["algo.name=mpo", "env.id=Pendulum-v1", "algo.mpo.epsilon_mean=0"])
    cartpole = load_config(None, ["algo.name=mpo", "env.id=CartPole-v1"])
    problem = action_space_problem("mpo", env_spaces(cartpole), "CartPole-v1")
    assert "mpo needs a Box action space" in problem and "use dqn" in problem


def test_the_critics_value_sampled_actions_as_their_forward_does():
    """EnsembleCritic.sampled (the E-step's matrix-product output layer, no gradient) against
    the forward pass on the same rows, repeated per sample."""
    _, alg, _ = setup()
    torch.manual_seed(3)
    obs, actions = torch.randn(5, 3), torch.rand(6, 5, 1) * 2 - 1
    rows = obs.unsqueeze(0).expand(6, 5, 3).reshape(30, 3)
    expected = alg.critic(rows, actions.reshape(30, 1)).reshape(2, 6, 5)
    sampled = alg.critic.sampled(obs, actions)
    torch.testing.assert_close(sampled, expected)
    assert not sampled.requires_grad
