"""Flat optimisers match torch.optim; the numpy engine matches the torch actor."""
import numpy as np
import pytest
import torch

from hpcrl.build import env_spaces, make_actor
from hpcrl.config import from_dict
from hpcrl.models.acting import computes_rows_alone, make_engine
from hpcrl.models.actor_engines import NumpyEngine
from hpcrl.numerics.flat import contiguous_parameters, grads_to_flat, zero_flat_gradients
from hpcrl.numerics.optim import FlatAdam, FlatRMSprop


@pytest.mark.parametrize("kind", ["adam", "rmsprop"])
def test_flat_optimizer_matches_torch(kind):
    torch.manual_seed(0)
    ours, ref = torch.nn.Linear(5, 3), torch.nn.Linear(5, 3)
    ref.load_state_dict(ours.state_dict())
    flat = contiguous_parameters(ours)
    if kind == "adam":
        opt = FlatAdam(flat.numel(), eps=1e-5)
        ref_opt = torch.optim.Adam(ref.parameters(), 3e-3, eps=1e-5)
    else:
        opt = FlatRMSprop(flat.numel(), eps=1e-5)
        ref_opt = torch.optim.RMSprop(ref.parameters(), 3e-3, alpha=0.99, eps=1e-5)
    for _ in range(25):
        x = torch.randn(16, 5)
        zero_flat_gradients(ours)
        ours(x).pow(2).sum().backward()
        with torch.no_grad():
            opt.step(flat, grads_to_flat(ours), 3e-3)
        ref_opt.zero_grad()
        ref(x).pow(2).sum().backward()
        ref_opt.step()
    for a, b in zip(ours.parameters(), ref.parameters(), strict=False):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_flat_gradients_are_views_filled_by_backward():
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    contiguous_parameters(net)
    grads = zero_flat_gradients(net)
    net(torch.ones(2, 3)).sum().backward()
    expected = torch.cat([p.grad.reshape(-1) for p in net.parameters()])
    assert grads.abs().sum() > 0
    torch.testing.assert_close(grads, expected)
    assert zero_flat_gradients(net) is grads and grads.abs().sum() == 0


def moved_actor(env_id: str, shared: bool):
    cfg = from_dict({}, [f"env.id={env_id}", f"actor.shared_trunk={str(shared).lower()}"])
    actor = make_actor(cfg, env_spaces(cfg))
    with torch.no_grad():
        for p in actor.parameters():
            p.add_(torch.randn_like(p) * 0.3)  # move off the tiny-head initialisation
    return actor


@pytest.mark.parametrize("rows_alone", [False, True], ids=["batched", "rows-alone"])
@pytest.mark.parametrize("env_id, shared", [("CartPole-v1", False), ("CartPole-v1", True),
                                            ("Pendulum-v1", False)])
def test_numpy_engine_matches_torch_actor(env_id, shared, rows_alone):
    actor = moved_actor(env_id, shared)
    engine = make_engine(actor, rows_alone=rows_alone)
    assert isinstance(engine, NumpyEngine) and computes_rows_alone(engine) == rows_alone
    obs = np.random.default_rng(0).standard_normal((64,) + actor.obs_shape).astype(np.float32)
    if actor.discrete:
        noise = np.random.default_rng(1).random(64, dtype=np.float32)
    else:
        noise = np.random.default_rng(1).standard_normal((64, 1), dtype=np.float32)
    a, logp, v, state = engine.step(obs, noise)
    with torch.no_grad():
        ta, tlogp, tv, tstate = actor.step(torch.from_numpy(obs), torch.from_numpy(noise))
    assert state is None and tstate is None  # feedforward: no recurrent state
    np.testing.assert_allclose(a, ta.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(logp, tlogp.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(v, tv.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(engine.value(obs), tv.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("env_id, shared", [("CartPole-v1", False), ("CartPole-v1", True),
                                            ("Acrobot-v1", False), ("Pendulum-v1", False)])
def test_rows_computed_alone_do_not_depend_on_the_rows_beside_them(env_id, shared):
    """A deterministic job's engine: the actions, log-probs and values of rows a..b are
    those of the same rows in a batch of 12, bit for bit, for every a < b (a matrix product
    of the whole batch rounds some of them otherwise: BLAS picks kernels by shape)."""
    actor = moved_actor(env_id, shared)
    engine = make_engine(actor, rows_alone=True)
    rng = np.random.default_rng(0)
    obs = rng.standard_normal((12,) + actor.obs_shape).astype(np.float32)
    shape = (12,) + tuple(actor.distribution.noise_shape())
    noise = (rng.random(shape, dtype=np.float32) if actor.distribution.uniform_noise
             else rng.standard_normal(shape, dtype=np.float32))
    whole, values = engine.step(obs, noise)[:3], engine.value(obs)
    for a in range(12):
        for b in range(a + 1, 13):
            part = engine.step(obs[a:b], noise[a:b])[:3]
            assert all(np.array_equal(p, w[a:b]) for p, w in zip(part, whole, strict=True))
            assert np.array_equal(engine.value(obs[a:b]), values[a:b])
