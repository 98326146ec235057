"""Cross-process sums for statistics that must cover the whole batch of the job.

Core code never talks to other processes itself. Where a statistic must span every
gradient rank (the mean and std used to normalise advantages, say), it calls a reducer;
the default reducer is local, and the comm layer supplies one that all-reduces.
"""
from __future__ import annotations

from typing import Protocol

import torch


class Reducer(Protocol):
    """Sums tensors in place over a group of processes."""

    def sum_(self, tensor: torch.Tensor, /) -> torch.Tensor:
        """Replace ``tensor`` by its sum over the group and return it."""
        ...


class LocalReducer:
    """The reducer of a single process: a sum over one member is the value itself."""

    def sum_(self, tensor: torch.Tensor) -> torch.Tensor:
        """``tensor`` unchanged."""
        return tensor


class ReducerSlot:
    """A reducer chosen after the algorithm that sums through it was built: a learner's
    gradient all-reducer (which may carry these sums on a GPU) is sized by the algorithm's
    parameters, so it can only exist once the algorithm does. Local until bound."""

    def __init__(self) -> None:
        self.reducer: Reducer = LocalReducer()

    def bind(self, reducer: Reducer | None) -> None:
        """Sum through ``reducer`` from now on (None: this process alone)."""
        self.reducer = reducer if reducer is not None else LocalReducer()

    @property
    def local(self) -> bool:
        """Whether the sums cover this process alone."""
        return isinstance(self.reducer, LocalReducer)

    def sum_(self, tensor: torch.Tensor) -> torch.Tensor:
        """``tensor`` summed by the bound reducer."""
        return self.reducer.sum_(tensor)


def _is_local(reducer: Reducer) -> bool:
    """Whether ``reducer`` sums over this process alone."""
    return isinstance(reducer, LocalReducer) or (isinstance(reducer, ReducerSlot)
                                                  and reducer.local)


def global_mean_std(x: torch.Tensor, reducer: Reducer) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and (unbiased) std of ``x`` over the samples of every process in the group."""
    if _is_local(reducer) and x.numel() > 1:  # one process: one kernel
        std, mean = torch.std_mean(x)
        return mean, std
    stats = torch.stack([x.new_tensor(float(x.numel())), x.sum(), (x * x).sum()]).double()
    count, total, total_sq = reducer.sum_(stats).unbind()
    mean = total / count
    var = (total_sq - count * mean * mean) / torch.clamp(count - 1, min=1)
    return mean.to(x.dtype), var.clamp(min=0).sqrt().to(x.dtype)
