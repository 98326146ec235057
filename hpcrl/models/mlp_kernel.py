"""Small MLPs on the CPU in numpy: the collectors' forward pass, and the learners' forward
and backward pass as one autograd operation.

Why: for the networks of classic control and MuJoCo (a few layers of 64-256 units, batches of
a few hundred rows) torch spends more time dispatching operations and recording the autograd
graph than doing arithmetic, and its float32 ``tanh`` on the CPU is far slower than numpy's
vectorised one (measured 8x on 256x64 on this project's machines). :func:`run_mlp` therefore
evaluates a chain of ``nn.Linear`` layers and activations as a single autograd node whose
forward and backward are a handful of numpy calls on views of the same weights. The
gradients land in the parameters' ``.grad`` as any other op's would, so optimisers, gradient
all-reduce and checkpoints do not know the difference; results agree with torch's to float
rounding (tests compare both).

Anything the kernel does not cover runs the modules as torch would: other devices and dtypes,
autocast, tracing and compiling, torch.func transforms, and layers too large for dispatch to
matter (:data:`MAX_KERNEL_MACS`). A loss that differentiates twice (``create_graph=True``, a
gradient penalty say) gets torch's own backward for that pass, so second derivatives are
exact too.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

Layer = tuple[np.ndarray, np.ndarray, Callable[[np.ndarray], np.ndarray] | None]

# The kernel runs a chain whose largest layer takes at most this many multiply-adds
# (rows x inputs x outputs); beyond it a matrix product outweighs dispatch, and torch's
# multithreaded BLAS is the better choice.
MAX_KERNEL_MACS = 1 << 22


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0.0, out=x)


def _elu(x: np.ndarray) -> np.ndarray:
    return np.where(x > 0, x, np.expm1(np.minimum(x, 0.0)))


def _tanh(x: np.ndarray) -> np.ndarray:
    return np.tanh(x, out=x)


NUMPY_ACTIVATIONS: dict[type, Callable[[np.ndarray], np.ndarray]] = {
    nn.Tanh: _tanh, nn.ReLU: _relu, nn.ELU: _elu}


def _numpy_activation(module: nn.Module) -> Callable[[np.ndarray], np.ndarray] | None:
    """The numpy form of an activation module, None when it has none (an ELU's alpha other
    than 1, say)."""
    if type(module) is nn.ELU and module.alpha != 1.0:
        return None
    return NUMPY_ACTIVATIONS.get(type(module))


def _tanh_grad(d: np.ndarray, y: np.ndarray) -> np.ndarray:
    return d * (1.0 - y * y)


def _relu_grad(d: np.ndarray, y: np.ndarray) -> np.ndarray:
    return d * (y > 0)


def _elu_grad(d: np.ndarray, y: np.ndarray) -> np.ndarray:
    return d * np.where(y > 0, 1.0, y + 1.0).astype(np.float32)


# d(loss)/d(pre-activation) from d(loss)/d(output) and the output itself
_ACTIVATION_GRADS: dict[Callable[[np.ndarray], np.ndarray], Callable[..., np.ndarray]] = {
    _tanh: _tanh_grad, _relu: _relu_grad, _elu: _elu_grad}
# the same activations in torch, for a backward pass that must itself be differentiable
_TORCH_ACTIVATIONS: dict[Callable[[np.ndarray], np.ndarray], Callable[..., torch.Tensor]] = {
    _tanh: torch.tanh, _relu: torch.relu, _elu: F.elu}


def _chain(modules: Sequence[nn.Module], strict: bool = False
           ) -> tuple[list[nn.Linear], list[Any]] | None:
    """The Linear layers of ``modules`` (Sequentials unrolled) and the numpy activation after
    each (None where none follows). A module with no numpy form (a layer without bias, an
    activation numpy lacks): None, or with ``strict`` a TypeError naming it."""
    linears: list[nn.Linear] = []
    acts: list[Any] = []
    for module in modules:
        for m in (module if isinstance(module, nn.Sequential) else (module,)):
            if type(m) is nn.Linear and m.bias is not None:
                linears.append(m)
                acts.append(None)
            elif _numpy_activation(m) is not None and acts and acts[-1] is None:
                acts[-1] = _numpy_activation(m)
            elif strict:
                raise TypeError(f"no numpy form for layer {type(m).__name__}")
            else:
                return None
    return linears, acts


def _views(weight: torch.Tensor, bias: torch.Tensor, act: Any) -> Layer:
    return weight.detach().numpy().T, bias.detach().numpy(), act


def layer_views(*modules: nn.Module) -> list[Layer]:
    """``(weight^T, bias, activation)`` numpy views (no copy) of the Linear layers of
    ``modules`` in order, each with the activation that follows it (None if none does)."""
    linears, acts = _chain(modules, strict=True)  # type: ignore[misc]
    return [_views(m.weight, m.bias, act) for m, act in zip(linears, acts, strict=True)]


def rows_alone(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``x @ w`` for ``x [B, in]`` with every row multiplied on its own (one matrix-vector
    product each, in one call): a row's result then depends on that row alone. A matrix
    product of the whole batch does not promise that: BLAS picks its kernels by the
    matrix's shape (a single row, a remainder of rows), and they round differently, so one
    observation's actions and values would change in their last bit with the rows beside
    it (a collector's other envs, the requests an inference rank batched)."""
    return np.matmul(x[:, None, :], w)[:, 0, :]


def forward(layers: Sequence[Layer], x: np.ndarray,
            outputs: list[np.ndarray] | None = None, alone: bool = False) -> np.ndarray:
    """The chain's output for a batch ``x [B, in]`` (float32); with ``outputs``, each
    layer's output is appended to it (what a backward pass needs); ``alone``: every row
    through :func:`rows_alone` (results that do not depend on the batch)."""
    for w, b, act in layers:
        x = rows_alone(x, w) if alone else x @ w
        x += b
        if act is not None:
            x = act(x)
        if outputs is not None:
            outputs.append(x)
    return x


def paired(first: Sequence[Layer], second: Sequence[Layer]) -> list[Layer] | None:
    """Two chains fed the same input and alike in depth, activations and widths but for
    their last layer's outputs (an actor's policy and value networks: equal trunks, heads
    of their own), as one chain of stacked copies (weights ``[2, in, out]``, biases
    ``[2, 1, out]``, the narrower last layer padded with zero columns) that
    :func:`forward_pair` runs with one call per layer for both; None where they differ
    otherwise. Copies: made again after new weights."""
    if len(first) != len(second):
        return None
    for i, ((w1, _, act1), (w2, _, act2)) in enumerate(zip(first, second, strict=True)):
        widths_differ = w1.shape[1] != w2.shape[1] and i < len(first) - 1
        if act1 is not act2 or w1.shape[0] != w2.shape[0] or widths_differ:
            return None
    layers: list[Layer] = []
    for (w1, b1, act), (w2, b2, _) in zip(first, second, strict=True):
        out = max(w1.shape[1], w2.shape[1])
        # each weight as torch keeps it ([out, in], rows contiguous), viewed as [in, out]:
        # the memory order of layer_views' transposed views
        w = np.zeros((2, out, w1.shape[0]), np.float32)
        b = np.zeros((2, 1, out), np.float32)
        for k, (wk, bk) in enumerate(((w1, b1), (w2, b2))):
            w[k, :wk.shape[1]] = wk.T
            b[k, 0, :bk.shape[0]] = bk
        layers.append((w.transpose(0, 2, 1), b, act))
    return layers


def forward_pair(layers: Sequence[Layer], x: np.ndarray, alone: bool = False
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Both chains of :func:`paired` on ``x [B, in]``: their outputs ``[B, out]`` (the
    narrower one's padding included), with one matrix product, one bias and one activation
    call per layer for the two; ``alone``: every row multiplied on its own, as
    :func:`rows_alone` does."""
    h = x[None, :, None, :] if alone else x[None]  # [1, B, 1, in] or [1, B, in]
    for w, b, act in layers:
        h = np.matmul(h, w[:, None] if alone else w)  # [2, B, 1, out] or [2, B, out]
        h += b[:, None] if alone else b
        if act is not None:
            h = act(h)
    if alone:
        h = h[:, :, 0, :]
    return h[0], h[1]


def _kernel_applies(x: torch.Tensor, linears: list[nn.Linear]) -> bool:
    weight = linears[0].weight
    if (x.device.type != "cpu" or x.dtype != torch.float32 or weight.device.type != "cpu"
            or weight.dtype != torch.float32 or x.dim() != 2):
        return False
    if (torch.jit.is_tracing() or torch.compiler.is_compiling()
            or torch.is_autocast_enabled("cpu")):
        return False
    wrapped = torch._C._functorch.is_functorch_wrapped_tensor
    if wrapped(x) or wrapped(weight):
        return False
    rows = x.shape[0]
    return all(rows * m.in_features * m.out_features <= MAX_KERNEL_MACS for m in linears)


def run_mlp(x: torch.Tensor, *modules: nn.Module) -> torch.Tensor:
    """``modules`` (Linear layers and activations, Sequentials of them) applied to ``x`` in
    order: by the numpy kernel where it applies (see the module's doc), by torch otherwise."""
    return run_mlps((x, modules))[0]


def run_mlps(*chains: tuple[torch.Tensor, Sequence[nn.Module]]) -> list[torch.Tensor]:
    """Each chain's modules applied to its input, as :func:`run_mlp` does; the chains the
    kernel takes run together as one autograd operation (a policy and a value network pay
    for one dispatch, not two)."""
    found = [(i, x, _chain(modules)) for i, (x, modules) in enumerate(chains)]
    kernel = [(i, x, chain) for i, x, chain in found
              if chain is not None and chain[0] and _kernel_applies(x, chain[0])]
    fast = [i for i, _, _ in kernel]
    outputs: list[torch.Tensor | None] = [None] * len(chains)
    if kernel:
        layout = tuple(tuple(chain[1]) for _, _, chain in kernel)
        params = [t for _, _, chain in kernel for m in chain[0] for t in (m.weight, m.bias)]
        results = _NumpyMLPs.apply(layout, *(x for _, x, _ in kernel), *params)
        for i, result in zip(fast, results, strict=True):
            outputs[i] = result
    for i, (x, modules) in enumerate(chains):
        if outputs[i] is None:
            for module in modules:
                x = module(x)
            outputs[i] = x
    return outputs  # type: ignore[return-value]


def _offsets(layout: tuple) -> list[int]:
    """Where each chain's weights start among the kernel's flat parameters (a weight and a
    bias per layer)."""
    return list(itertools.accumulate((2 * len(acts) for acts in layout[:-1]), initial=0))


class _NumpyMLPs(torch.autograd.Function):
    """Forward and backward of Linear/activation chains in numpy (see :func:`run_mlps`).

    Inputs: ``layout`` (per chain, the numpy activation after each layer), then each chain's
    input, then every chain's weights and biases in order."""

    @staticmethod
    def forward(ctx: Any, layout: tuple, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        xs, params = tensors[:len(layout)], tensors[len(layout):]
        outs, lasts, hidden = [], [], []
        for x, acts, first in zip(xs, layout, _offsets(layout), strict=True):
            layers = [_views(params[first + 2 * i], params[first + 2 * i + 1], act)
                      for i, act in enumerate(acts)]
            outputs: list[np.ndarray] = []
            out = torch.from_numpy(forward(layers, x.detach().numpy(), outputs))
            outs.append(out)
            lasts.append(out if acts[-1] is not None else None)
            hidden.append(outputs[:-1])  # each the output of one layer and input of the next
        ctx.layout, ctx.hidden = layout, hidden
        ctx.set_materialize_grads(False)  # an unused output costs no backward work
        # torch checks inputs and outputs against in-place changes before backward
        ctx.save_for_backward(*xs, *lasts, *params)
        return tuple(outs)

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor | None) -> tuple[torch.Tensor | None, ...]:
        layout, n = ctx.layout, len(ctx.layout)
        saved = ctx.saved_tensors
        xs, lasts, params = saved[:n], saved[n:2 * n], saved[2 * n:]
        needs = ctx.needs_input_grad[1:]
        if torch.is_grad_enabled():  # create_graph: this pass must be differentiable
            return (None, *_torch_backward(layout, xs, params, grads, needs))
        result: list[torch.Tensor | None] = [None] * len(needs)
        chains = zip(layout, _offsets(layout), xs, lasts, grads, strict=True)
        for c, (acts, first, x, last, grad) in enumerate(chains):
            if grad is not None:
                hidden = ctx.hidden[c]
                inputs = [x.detach().numpy()] + hidden
                outputs = hidden + [None if last is None else last.detach().numpy()]
                d = np.ascontiguousarray(grad.numpy())
                for i in reversed(range(len(acts))):
                    if acts[i] is not None:
                        d = _ACTIVATION_GRADS[acts[i]](d, outputs[i])
                    w = first + 2 * i
                    if needs[n + w]:
                        result[n + w] = torch.from_numpy(d.T @ inputs[i])
                    if needs[n + w + 1]:
                        result[n + w + 1] = torch.from_numpy(d.sum(axis=0))
                    if i > 0 or needs[c]:
                        d = d @ params[w].detach().numpy()
                if needs[c]:
                    result[c] = torch.from_numpy(d)
        return (None, *result)


def _torch_backward(layout: tuple, xs: Sequence[torch.Tensor], params: Sequence[torch.Tensor],
                    grads: Sequence[torch.Tensor | None], needs: Sequence[bool]
                    ) -> list[torch.Tensor | None]:
    """The kernel's gradients through torch's own forward and autograd, with a graph (what a
    second derivative needs)."""
    outs = []
    for x, acts, first in zip(xs, layout, _offsets(layout), strict=True):
        h = x
        for i, act in enumerate(acts):
            h = F.linear(h, params[first + 2 * i], params[first + 2 * i + 1])
            if act is not None:
                h = _TORCH_ACTIVATIONS[act](h)
        outs.append(h)
    used = [(out, grad) for out, grad in zip(outs, grads, strict=True) if grad is not None]
    inputs = (*xs, *params)
    wanted = [t for t, need in zip(inputs, needs, strict=True) if need]
    found = iter(torch.autograd.grad([o for o, _ in used], wanted, [g for _, g in used],
                                     create_graph=True, allow_unused=True))
    return [next(found) if need else None for need in needs]
