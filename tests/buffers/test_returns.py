"""GAE against hand-computed cases: termination cuts the bootstrap, truncation keeps it."""
import pytest
import torch

from hpcrl.buffers.returns import gae


def col(*xs):
    return torch.tensor(xs, dtype=torch.float64).unsqueeze(1)


def test_gae_lambda_one_is_discounted_return_with_bootstrap():
    rewards, values = col(1.0, 1.0, 1.0), col(0.5, 0.5, 0.5)
    zeros = col(0, 0, 0)
    next_values = col(0.5, 0.5, 2.0)  # V(s_3) = 2 bootstraps the unfinished episode
    adv, ret = gae(rewards, values, zeros, zeros, next_values, gamma=0.9, lam=1.0)
    expected = col(1 + 0.9 + 0.81 + 0.729 * 2, 1 + 0.9 + 0.81 * 2, 1 + 0.9 * 2)
    torch.testing.assert_close(ret, expected)
    torch.testing.assert_close(adv, expected - values)


def test_termination_does_not_bootstrap_and_cuts_the_trace():
    rewards, values = col(1.0, 2.0, 3.0), col(0.0, 0.0, 0.0)
    term, trunc = col(0, 1, 0), col(0, 0, 0)
    next_values = col(0.0, 99.0, 5.0)  # 99 must be ignored: s_2 ended by termination
    adv, ret = gae(rewards, values, term, trunc, next_values, gamma=0.5, lam=1.0)
    torch.testing.assert_close(ret, col(1 + 0.5 * 2, 2.0, 3 + 0.5 * 5))


def test_truncation_bootstraps_from_the_final_observation_value():
    rewards, values = col(1.0, 2.0, 3.0), col(0.0, 0.0, 0.0)
    term, trunc = col(0, 0, 0), col(0, 1, 0)
    next_values = col(0.0, 10.0, 5.0)  # V(final obs) = 10 at the truncated step
    adv, ret = gae(rewards, values, term, trunc, next_values, gamma=0.5, lam=1.0)
    torch.testing.assert_close(ret, col(1 + 0.5 * (2 + 0.5 * 10), 2 + 0.5 * 10, 3 + 0.5 * 5))


def test_lambda_zero_is_one_step_td():
    rewards, values = col(1.0, 1.0), col(0.3, 0.7)
    zeros = col(0, 0)
    next_values = col(0.7, 0.2)
    adv, _ = gae(rewards, values, zeros, zeros, next_values, gamma=0.9, lam=0.0)
    torch.testing.assert_close(adv, col(1 + 0.9 * 0.7 - 0.3, 1 + 0.9 * 0.2 - 0.7))


def test_hand_computed_mixed_case_two_envs():
    # env 0 terminates at t=1; env 1 is truncated at t=0
    rewards = torch.tensor([[1.0, 1.0], [1.0, 1.0], [1.0, 1.0]])
    values = torch.tensor([[0.5, 0.5], [0.5, 0.5], [0.5, 0.5]])
    term = torch.tensor([[0, 0], [1, 0], [0, 0]], dtype=torch.bool)
    trunc = torch.tensor([[0, 1], [0, 0], [0, 0]], dtype=torch.bool)
    next_values = torch.tensor([[0.5, 4.0], [0.0, 0.5], [1.0, 1.0]])
    g, lam = 0.9, 0.5
    adv, ret = gae(rewards, values, term, trunc, next_values, g, lam)
    d = rewards + g * (1 - term.float()) * next_values - values
    a2 = d[2]
    a1 = torch.stack([d[1, 0], d[1, 1] + g * lam * a2[1]])
    a0 = torch.stack([d[0, 0] + g * lam * a1[0], d[0, 1]])
    torch.testing.assert_close(adv, torch.stack([a0, a1, a2]))
    torch.testing.assert_close(ret, adv + values)


def test_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match=r"\[T, N\]"):
        gae(torch.zeros(3, 2), torch.zeros(3, 2), torch.zeros(3, 2), torch.zeros(3, 2),
            torch.zeros(2, 2), 0.9, 0.9)
