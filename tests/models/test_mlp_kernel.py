"""The numpy MLP kernel: same outputs and gradients as torch, and torch wherever it does not
apply (other dtypes, transforms, tracing, large layers, second derivatives)."""
from __future__ import annotations

import pytest
import torch
from torch import nn

import hpcrl.models.mlp_kernel as kernel
from hpcrl.build import env_spaces, make_actor
from hpcrl.config.loader import from_dict
from hpcrl.models.mlp_kernel import run_mlp, run_mlps


def _chain(activation: type[nn.Module], last_activation: bool = False) -> list[nn.Module]:
    torch.manual_seed(0)
    trunk = nn.Sequential(nn.Linear(5, 16), activation(), nn.Linear(16, 16), activation())
    head = nn.Sequential(nn.Linear(16, 3), activation()) if last_activation else nn.Linear(16, 3)
    return [trunk, head]


def _grads(modules: list[nn.Module], x: torch.Tensor, use_kernel: bool
           ) -> tuple[torch.Tensor, list[torch.Tensor], torch.Tensor | None]:
    for m in modules:
        m.zero_grad(set_to_none=True)
    x = x.detach().clone().requires_grad_(x.requires_grad)
    if use_kernel:
        out = run_mlp(x, *modules)
    else:
        out = x
        for m in modules:
            out = m(out)
    weights = torch.linspace(-1, 1, out.numel()).view_as(out)
    (out * weights).sum().backward()
    params = [p.grad.clone() for m in modules for p in m.parameters()]
    return out.detach(), params, (None if x.grad is None else x.grad.clone())


@pytest.mark.parametrize("activation", [nn.Tanh, nn.ReLU, nn.ELU])
@pytest.mark.parametrize("input_grad", [False, True])
@pytest.mark.parametrize("last_activation", [False, True])
def test_kernel_matches_torch_outputs_and_gradients(activation, input_grad, last_activation):
    modules = _chain(activation, last_activation)
    x = torch.randn(64, 5, generator=torch.Generator().manual_seed(1)).requires_grad_(input_grad)
    out, params, x_grad = _grads(modules, x, use_kernel=True)
    ref_out, ref_params, ref_x_grad = _grads(modules, x, use_kernel=False)
    torch.testing.assert_close(out, ref_out, rtol=1e-5, atol=1e-6)
    for got, want in zip(params, ref_params, strict=False):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    if input_grad:
        torch.testing.assert_close(x_grad, ref_x_grad, rtol=1e-4, atol=1e-5)
    else:
        assert x_grad is None


def test_chains_run_together_as_torch_would():
    """Two chains in one operation: on one input (the gradients add up), with an output the
    loss leaves out (no gradient for its weights), and beside a chain the kernel does not
    take (float64: torch runs it). The chains differ in depth, so each finds its own weights
    among the operation's parameters."""
    pi = _chain(nn.Tanh)
    vf = [nn.Sequential(nn.Linear(5, 16), nn.ReLU()), nn.Linear(16, 1)]  # 2 layers to pi's 3
    other = [m.double() for m in _chain(nn.ELU)]
    x0 = torch.randn(32, 5, generator=torch.Generator().manual_seed(5))

    def grads(use_kernel: bool, with_value: bool) -> list[torch.Tensor]:
        for m in pi + vf + other:
            m.zero_grad(set_to_none=True)
        x = x0.clone().requires_grad_(True)
        y = x0.double().requires_grad_(True)
        chains = [(x, pi), (x, vf), (y, other)]
        if use_kernel:
            a, b, c = run_mlps(*chains)
        else:
            a, b, c = (modules[1](modules[0](t)) for t, modules in chains)
        loss = a.square().sum() + c.sum() + (b.sum() if with_value else 0)
        loss.backward()
        zero = torch.zeros(())
        return [x.grad, y.grad] + [zero if p.grad is None else p.grad
                                   for m in pi + vf + other for p in m.parameters()]

    for with_value in (True, False):
        got, want = grads(True, with_value), grads(False, with_value)
        for g, w in zip(got, want, strict=False):
            torch.testing.assert_close(g.to(w.dtype), w, rtol=1e-4, atol=1e-5)
        if not with_value:
            assert all(p.grad is None for m in vf for p in m.parameters())


def _kernel_calls(monkeypatch) -> list[int]:
    calls: list[int] = []
    apply = kernel._NumpyMLPs.apply

    def counting(*args):
        calls.append(1)
        return apply(*args)
    monkeypatch.setattr(kernel._NumpyMLPs, "apply", counting)
    return calls


def test_actor_critic_runs_its_trunks_and_heads_through_the_kernel(monkeypatch):
    """The embedded default's actor takes the fast path on the CPU, and its loss gradients
    equal those of the same actor run by torch."""
    config = from_dict({})
    actor = make_actor(config, env_spaces(config))
    obs = torch.randn(256, 4, generator=torch.Generator().manual_seed(2))
    actions = torch.randint(0, 2, (256,), generator=torch.Generator().manual_seed(3))

    def loss_grads() -> torch.Tensor:
        actor.zero_grad(set_to_none=True)
        log_probs, entropy, values = actor.evaluate(obs, actions)
        (log_probs.mean() + entropy.mean() + values.square().mean()).backward()
        return torch.cat([p.grad.reshape(-1) for p in actor.parameters()])

    calls = _kernel_calls(monkeypatch)
    fast = loss_grads()
    assert len(calls) == 1  # policy trunk+head and value trunk+head in one operation
    monkeypatch.setattr(kernel, "MAX_KERNEL_MACS", 0)  # torch for every layer
    reference = loss_grads()
    assert len(calls) == 1
    torch.testing.assert_close(fast, reference, rtol=1e-4, atol=1e-6)


def test_torch_runs_what_the_kernel_does_not_cover(monkeypatch):
    modules = _chain(nn.Tanh)
    calls = _kernel_calls(monkeypatch)
    x = torch.randn(8, 5)

    run_mlp(x.double(), *[m.double() for m in _chain(nn.Tanh)])  # float64
    assert not calls

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.parts = nn.ModuleList(modules)

        def forward(self, t: torch.Tensor) -> torch.Tensor:
            return run_mlp(t, *self.parts)

    with pytest.warns(DeprecationWarning):
        traced = torch.jit.trace(Net(), (x,))  # tracing (exporting) records torch's ops
    assert "PythonOp" not in str(traced.graph)  # the graph holds torch's own ops
    torch.testing.assert_close(traced(x), run_mlp(x, *modules))
    calls.clear()
    params = {k: v.detach() for k, v in modules[0].named_parameters()}
    grad = torch.func.grad(  # a torch.func transform over the weights
        lambda p: run_mlp(torch.func.functional_call(modules[0], p, (x,))).sum())(params)
    assert set(grad) == set(params)
    monkeypatch.setattr(kernel, "MAX_KERNEL_MACS", 8 * 16 * 16 - 1)  # layers too large
    run_mlp(x, *modules)
    run_mlp(x, nn.Linear(5, 3, bias=False))  # a layer without bias
    run_mlp(x, nn.Linear(5, 3), nn.Sigmoid())  # an activation with no numpy form
    elu = [nn.Linear(5, 3), nn.ELU(alpha=0.5)]  # nor an ELU of another alpha
    torch.testing.assert_close(run_mlp(x, *elu), elu[1](elu[0](x)))
    assert not calls
    monkeypatch.setattr(kernel, "MAX_KERNEL_MACS", 8 * 16 * 16)
    run_mlp(x, *modules)
    assert len(calls) == 1


def test_second_derivatives_equal_torchs():
    """A gradient penalty (the gradient's norm, differentiated again) through the kernel."""
    modules = _chain(nn.Tanh)
    x0 = torch.randn(16, 5, generator=torch.Generator().manual_seed(4))

    def penalty_grads(use_kernel: bool) -> list[torch.Tensor]:
        for m in modules:
            m.zero_grad(set_to_none=True)
        x = x0.clone().requires_grad_(True)
        out = run_mlp(x, *modules) if use_kernel else modules[1](modules[0](x))
        (grad,) = torch.autograd.grad(out.sum(), x, create_graph=True)
        grad.square().sum().backward()
        return [torch.zeros_like(p) if p.grad is None else p.grad.clone()  # the last bias
                for m in modules for p in m.parameters()]  # does not change d out / dx

    for got, want in zip(penalty_grads(True), penalty_grads(False), strict=False):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)


def test_an_output_changed_in_place_before_backward_is_detected():
    modules = _chain(nn.Tanh, last_activation=True)  # backward needs the chain's output
    out = run_mlp(torch.randn(4, 5), *modules)
    loss = out.sum()
    out.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_train_torch_threads_bounds_numpys_blas_too():
    """The kernel's matrix products run in numpy's BLAS, which would otherwise start a thread
    per core of the node in every rank."""
    from threadpoolctl import threadpool_info

    from hpcrl.runtime.cpu import set_compute_threads

    def blas_threads() -> set[int]:
        return {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}

    before = torch.get_num_threads()
    try:
        set_compute_threads(2)
        assert blas_threads() == {2} and torch.get_num_threads() == 2
        set_compute_threads(1)
        assert blas_threads() == {1} and torch.get_num_threads() == 1
    finally:
        set_compute_threads(before)
