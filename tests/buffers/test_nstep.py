"""n-step targets: the pure function on episodes that end mid-window, and the online window
that the collectors use agrees with it."""
import numpy as np
import pytest
import torch

from hpcrl.buffers.replay.nstep import NStepWindow
from hpcrl.buffers.returns import nstep


def col(*xs, dtype=torch.float64):
    return torch.tensor(xs, dtype=dtype).unsqueeze(1)


def test_termination_mid_window_stops_the_sum_and_the_bootstrap():
    rewards = col(1.0, 2.0, 3.0, 4.0, 5.0)
    term = col(0, 1, 0, 0, 0, dtype=torch.bool)  # the episode terminates at t=1
    trunc = col(0, 0, 0, 0, 0, dtype=torch.bool)
    ret, disc, last = nstep(rewards, term, trunc, gamma=0.5, n=3)
    torch.testing.assert_close(ret, col(1 + 0.5 * 2, 2.0, 3 + 0.5 * 4 + 0.25 * 5,
                                        4 + 0.5 * 5, 5.0))
    # t=0,1 end at the termination (no bootstrap); t=2 is a full window; t=3,4 hit the data end
    torch.testing.assert_close(disc, col(0.0, 0.0, 0.125, 0.25, 0.5))
    assert last[:, 0].tolist() == [1, 1, 4, 4, 4]


def test_truncation_mid_window_bootstraps_from_the_truncated_step():
    rewards = col(1.0, 1.0, 1.0, 1.0)
    term = col(0, 0, 0, 0, dtype=torch.bool)
    trunc = col(0, 1, 0, 0, dtype=torch.bool)  # time limit at t=1
    ret, disc, last = nstep(rewards, term, trunc, gamma=0.9, n=3)
    torch.testing.assert_close(ret, col(1.9, 1.0, 1.9, 1.0))
    torch.testing.assert_close(disc, col(0.81, 0.9, 0.81, 0.9))
    assert last[:, 0].tolist() == [1, 1, 3, 3]  # next_obs[1] is the final observation


def test_one_step_is_the_td_target():
    g = torch.Generator().manual_seed(0)
    rewards = torch.randn(6, 3, generator=g)
    term = torch.rand(6, 3, generator=g) < 0.3
    trunc = (torch.rand(6, 3, generator=g) < 0.3) & ~term
    ret, disc, last = nstep(rewards, term, trunc, gamma=0.99, n=1)
    torch.testing.assert_close(ret, rewards)
    torch.testing.assert_close(disc, torch.where(term, 0.0, 0.99))
    assert torch.equal(last, torch.arange(6).unsqueeze(1).expand(6, 3))


def random_stream(seed, steps, envs):
    rng = np.random.default_rng(seed)
    rewards = rng.standard_normal((steps, envs)).astype(np.float32)
    ends = rng.random((steps, envs)) < 0.25
    term = ends & (rng.random((steps, envs)) < 0.5)
    trunc = ends & ~term
    return rewards, term, trunc


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_online_window_emits_what_nstep_computes(n):
    steps, envs, gamma = 40, 3, 0.9
    rewards, term, trunc = random_stream(n, steps, envs)
    # observation of (t, env) identifies the step; next_obs of (t, env) is its successor
    obs = np.stack(np.meshgrid(np.arange(steps), np.arange(envs), indexing="ij"),
                   axis=-1).astype(np.float32)
    next_obs = obs + np.array([0.5, 0.0], np.float32)
    window = NStepWindow(n, gamma, envs, (2,), ())
    got = {}
    for t in range(steps):
        rows = window.push(obs[t], np.full(envs, t, np.float32), rewards[t], term[t], trunc[t],
                           next_obs[t])
        for o, _a, r, d, nxt in zip(*rows, strict=False):
            got[(int(o[0]), int(o[1]))] = (float(r), float(d), tuple(nxt))
    ret, disc, last = nstep(torch.from_numpy(rewards).double(), torch.from_numpy(term),
                            torch.from_numpy(trunc), gamma, n)
    expected = {}
    for t in range(steps):
        for e in range(envs):
            end = int(last[t, e])
            closed = bool(term[end, e] or trunc[end, e]) or end - t + 1 == n
            if closed:
                expected[(t, e)] = (float(ret[t, e]), float(disc[t, e]),
                                    tuple(next_obs[end, e]))
    assert got.keys() == expected.keys()
    for key, (r, d, nxt) in expected.items():
        assert got[key][0] == pytest.approx(r, rel=1e-5, abs=1e-5), key
        assert got[key][1] == pytest.approx(d, rel=1e-6), key
        assert got[key][2] == nxt, key
    assert window.pending == steps * envs - len(got)  # the open windows wait for more steps


def test_window_state_round_trips():
    rewards, term, trunc = random_stream(1, 10, 2)
    a, b = NStepWindow(3, 0.9, 2, (1,), ()), NStepWindow(3, 0.9, 2, (1,), ())
    obs = np.zeros((2, 1), np.float32)
    for t in range(5):
        a.push(obs + t, np.zeros(2, np.float32), rewards[t], term[t], trunc[t], obs + t + 1)
    b.load_state_dict(a.state_dict())
    for t in range(5, 10):
        ra = a.push(obs + t, np.zeros(2, np.float32), rewards[t], term[t], trunc[t], obs + t + 1)
        rb = b.push(obs + t, np.zeros(2, np.float32), rewards[t], term[t], trunc[t], obs + t + 1)
        for x, y in zip(ra, rb, strict=False):
            np.testing.assert_array_equal(x, y)
