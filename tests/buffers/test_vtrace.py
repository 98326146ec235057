"""V-trace against a direct implementation of the paper's definition, and its special cases."""
import pytest
import torch

from hpcrl.buffers.returns import vtrace


def paper_vtrace(log_rhos, discounts, rewards, values, bootstrap, clip_rho, clip_c):
    """v_s = V(x_s) + sum_{t=s}^{T-1} (prod_{i=s}^{t-1} discount_i c_i) delta_t, term by term."""
    steps, envs = values.shape
    rhos = log_rhos.exp()
    rho_bar = rhos.clamp(max=clip_rho) if clip_rho is not None else rhos
    c = rhos.clamp(max=clip_c) if clip_c is not None else rhos
    v_ext = torch.cat([values, bootstrap.unsqueeze(0)])
    vs = torch.zeros_like(values)
    for n in range(envs):
        for s in range(steps):
            total = values[s, n].clone()
            for t in range(s, steps):
                trace = torch.tensor(1.0, dtype=values.dtype)
                for i in range(s, t):
                    trace = trace * discounts[i, n] * c[i, n]
                delta = rho_bar[t, n] * (rewards[t, n] + discounts[t, n] * v_ext[t + 1, n]
                                         - values[t, n])
                total = total + trace * delta
            vs[s, n] = total
    vs_ext = torch.cat([vs, bootstrap.unsqueeze(0)])
    pg = rho_bar * (rewards + discounts * vs_ext[1:] - values)
    return vs, pg


def random_inputs(seed, steps=7, envs=3):
    g = torch.Generator().manual_seed(seed)
    log_rhos = torch.randn(steps, envs, generator=g, dtype=torch.float64) * 0.8
    ends = torch.rand(steps, envs, generator=g) < 0.2
    discounts = torch.where(ends, 0.0, 0.9).to(torch.float64)
    rewards = torch.randn(steps, envs, generator=g, dtype=torch.float64)
    values = torch.randn(steps, envs, generator=g, dtype=torch.float64)
    bootstrap = torch.randn(envs, generator=g, dtype=torch.float64)
    return log_rhos, discounts, rewards, values, bootstrap


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("clip_rho, clip_c", [(1.0, 1.0), (2.0, 0.5), (None, None)])
def test_vtrace_matches_the_papers_definition_on_random_inputs(seed, clip_rho, clip_c):
    inputs = random_inputs(seed)
    vs, pg = vtrace(*inputs, clip_rho=clip_rho, clip_c=clip_c)
    ref_vs, ref_pg = paper_vtrace(*inputs, clip_rho, clip_c)
    torch.testing.assert_close(vs, ref_vs)
    torch.testing.assert_close(pg, ref_pg)


def test_on_policy_without_clipping_is_the_n_step_bootstrapped_return():
    _, _, rewards, values, bootstrap = random_inputs(7, steps=6, envs=2)
    gamma = 0.9
    discounts = torch.full_like(rewards, gamma)
    zeros = torch.zeros_like(rewards)
    for clip in (None, 1.0):  # on-policy every rho is 1, so clipping at 1 changes nothing
        vs, pg = vtrace(zeros, discounts, rewards, values, bootstrap, clip, clip)
        steps = rewards.shape[0]
        for s in range(steps):
            ret = sum(gamma ** (k - s) * rewards[k] for k in range(s, steps))
            ret = ret + gamma ** (steps - s) * bootstrap
            torch.testing.assert_close(vs[s], ret)
        next_vs = torch.cat([vs[1:], bootstrap.unsqueeze(0)])
        torch.testing.assert_close(pg, rewards + gamma * next_vs - values)


def test_an_episode_end_stops_the_return():
    rewards = torch.tensor([[1.0], [2.0], [3.0]], dtype=torch.float64)
    values = torch.zeros_like(rewards)
    discounts = torch.tensor([[0.5], [0.0], [0.5]], dtype=torch.float64)  # ends after t=1
    vs, _ = vtrace(torch.zeros_like(rewards), discounts, rewards, values,
                   torch.tensor([10.0], dtype=torch.float64))
    torch.testing.assert_close(vs, torch.tensor([[1 + 0.5 * 2], [2.0], [3 + 0.5 * 10]],
                                                dtype=torch.float64))


def test_clipping_bounds_the_importance_weights():
    log_rhos, discounts, rewards, values, bootstrap = random_inputs(3)
    big = torch.full_like(log_rhos, 5.0)  # rho = e^5, far above the clip
    vs, pg = vtrace(big, discounts, rewards, values, bootstrap, 1.0, 1.0)
    on, on_pg = vtrace(torch.zeros_like(big), discounts, rewards, values, bootstrap, 1.0, 1.0)
    torch.testing.assert_close(vs, on)  # clipped at 1 everywhere: the on-policy targets
    torch.testing.assert_close(pg, on_pg)


def test_outputs_carry_no_gradient_and_shapes_are_checked():
    log_rhos, discounts, rewards, values, bootstrap = random_inputs(0)
    values.requires_grad_(True)
    vs, pg = vtrace(log_rhos, discounts, rewards, values, bootstrap)
    assert not vs.requires_grad and not pg.requires_grad
    with pytest.raises(ValueError, match=r"\[T, N\]"):
        vtrace(log_rhos, discounts, rewards, values, bootstrap[:1])
