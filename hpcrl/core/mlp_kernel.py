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

from typing import Any, Callable, Optional, Sequence

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

Layer = tuple[np.ndarray, np.ndarray, Optional[Callable[[np.ndarray], np.ndarray]]]

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


def layer_views(*modules: nn.Module) -> list[Layer]:
    """``(weight^T, bias, activation)`` numpy views (no copy) of the Linear layers of
    ``modules`` in order, each with the activation that follows it (None if none does)."""
    layers: list[Layer] = []
    for module in modules:
        for m in (module if isinstance(module, nn.Sequential) else [module]):
            if isinstance(m, nn.Linear):
                layers.append((m.weight.detach().numpy().T, m.bias.detach().numpy(), None))
            elif type(m) in NUMPY_ACTIVATIONS and layers and layers[-1][2] is None:
                w, b, _ = layers[-1]
                layers[-1] = (w, b, NUMPY_ACTIVATIONS[type(m)])
            else:
                raise TypeError(f"no numpy form for layer {type(m).__name__}")
    return layers


def forward(layers: Sequence[Layer], x: np.ndarray) -> np.ndarray:
    """The chain's output for a batch ``x [B, in]`` (float32)."""
    for w, b, act in layers:
        x = x @ w
        x += b
        if act is not None:
            x = act(x)
    return x


def _chain(modules: Sequence[nn.Module]) -> Optional[tuple[list[nn.Linear], list[Any]]]:
    """The Linear layers of ``modules`` (Sequentials unrolled) and the numpy activation after
    each, or None when some module has no numpy form or a layer has no bias."""
    linears: list[nn.Linear] = []
    acts: list[Any] = []
    for module in modules:
        for m in (module if isinstance(module, nn.Sequential) else (module,)):
            if type(m) is nn.Linear and m.bias is not None:
                linears.append(m)
                acts.append(None)
            elif type(m) in NUMPY_ACTIVATIONS and acts and acts[-1] is None:
                acts[-1] = NUMPY_ACTIVATIONS[type(m)]
            else:
                return None
    return (linears, acts) if linears else None


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
    chain = _chain(modules)
    if chain is None or not _kernel_applies(x, chain[0]):
        for module in modules:
            x = module(x)
        return x
    linears, acts = chain
    params = [t for m in linears for t in (m.weight, m.bias)]
    return _NumpyMLP.apply(x, tuple(acts), *params)


class _NumpyMLP(torch.autograd.Function):
    """Forward and backward of a Linear/activation chain in numpy (see :func:`run_mlp`)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, acts: tuple, *params: torch.Tensor
                ) -> torch.Tensor:
        h = x.detach().numpy()
        inputs, outputs = [], []
        for i, act in enumerate(acts):
            inputs.append(h)
            h = h @ params[2 * i].detach().numpy().T
            h += params[2 * i + 1].detach().numpy()
            if act is not None:
                h = act(h)
            outputs.append(h)
        out = torch.from_numpy(h)
        ctx.acts, ctx.inputs, ctx.outputs = acts, inputs[1:], outputs[:-1]
        # torch checks the input and output against in-place changes before backward
        ctx.save_for_backward(x, out if acts[-1] is not None else None, *params)
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Optional[torch.Tensor], ...]:
        x, last, *params = ctx.saved_tensors
        acts, needs = ctx.acts, ctx.needs_input_grad
        if torch.is_grad_enabled():  # create_graph: this pass must be differentiable
            return _torch_backward(acts, needs, x, params, grad)
        weights = params[::2]
        inputs = [x.detach().numpy()] + ctx.inputs
        outputs = ctx.outputs + [None if last is None else last.detach().numpy()]
        d = np.ascontiguousarray(grad.numpy())
        grads: list[Optional[torch.Tensor]] = [None] * (2 * len(acts))
        for i in reversed(range(len(acts))):
            if acts[i] is not None:
                d = _ACTIVATION_GRADS[acts[i]](d, outputs[i])
            if needs[2 + 2 * i]:
                grads[2 * i] = torch.from_numpy(d.T @ inputs[i])
            if needs[3 + 2 * i]:
                grads[2 * i + 1] = torch.from_numpy(d.sum(axis=0))
            if i > 0 or needs[0]:
                d = d @ weights[i].detach().numpy()
        return (torch.from_numpy(d) if needs[0] else None, None, *grads)


def _torch_backward(acts: tuple, needs: tuple[bool, ...], x: torch.Tensor,
                    params: list[torch.Tensor], grad: torch.Tensor
                    ) -> tuple[Optional[torch.Tensor], ...]:
    """The kernel's gradients through torch's own forward and autograd, with a graph (what a
    second derivative needs)."""
    h = x
    for i, act in enumerate(acts):
        h = F.linear(h, params[2 * i], params[2 * i + 1])
        if act is not None:
            h = _TORCH_ACTIVATIONS[act](h)
    inputs = (x, *params)
    flags = (needs[0], *needs[2:])
    wanted = [t for t, need in zip(inputs, flags) if need]
    found = iter(torch.autograd.grad(h, wanted, grad, create_graph=True))
    grads = [next(found) if need else None for need in flags]
    return (grads[0], None, *grads[1:])
