"""``train.compile``: the learner's loss and the inference ranks' forward under torch.compile.

A learner spends its update in many small kernels whose launches cost more than their work
where batches are small; torch.compile fuses them (inductor), and on a GPU the
``reduce-overhead`` mode replays the whole step as one CUDA graph. Both families' learners
compute their gradients through the algorithm's ``loss`` (:meth:`compute_gradients
<hpcrl.algorithms.algorithm.Algorithm.compute_gradients>`), so compiling that one method
compiles the forward and, through AOTAutograd, the backward of every algorithm, a plug-in's
included.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import torch

F = TypeVar("F", bound=Callable[..., Any])


def compile_mode(device: torch.device | str) -> str | None:
    """torch.compile's mode on ``device``: CUDA graphs on a GPU, the default elsewhere."""
    return "reduce-overhead" if torch.device(device).type == "cuda" else None


def compiled(fn: F, device: torch.device | str, dynamic: bool = False) -> F:
    """``fn`` compiled for ``device`` (``dynamic``: its batch size varies, as an inference
    rank's does with the requests it batches)."""
    _keep_stat_reads_out_of_graphs()
    out: Any = torch.compile(fn, mode=compile_mode(device), dynamic=dynamic)
    return out


def _read_floats(names: Sequence[str], values: Sequence[torch.Tensor | float]
                 ) -> dict[str, float]:
    """The floats of ``values`` by name, in one transfer off the device."""
    if not values:
        return {}
    tensors = [v.detach().float().reshape(()).cpu() if isinstance(v, torch.Tensor)
               else torch.tensor(float(v)) for v in values]
    return dict(zip(names, torch.stack(tensors).tolist(), strict=True))


_reader: Callable[[Sequence[str], Sequence[torch.Tensor | float]], dict[str, float]] = \
    _read_floats


def _keep_stat_reads_out_of_graphs() -> None:
    """Mark the statistics' read as never compiled, the first time anything is compiled.
    Done here rather than by a decorator at import: ``torch.compiler.disable`` imports
    TorchDynamo (about 1.8 s of CPU per process), which a run without ``train.compile``
    (every collector rank, every test) has no use for."""
    global _reader
    if _reader is _read_floats:
        _reader = torch.compiler.disable(_read_floats)


def stat_floats(names: Sequence[str], values: Sequence[torch.Tensor | float]
                ) -> dict[str, float]:
    """A loss's statistics as floats by name, read off the device in one transfer. Never
    compiled: under ``train.compile`` a float read inside the graph breaks it, and the rest
    of the loss would be compiled again for every new value of the statistics."""
    return _reader(names, values)


def compile_loss(algorithm: Any, device: torch.device | str) -> None:
    """Compile ``algorithm``'s loss for ``device`` (its gradients, forward and backward,
    from now on come from the compiled graph)."""
    algorithm.loss = compiled(algorithm.loss, device)
