"""An all-reducer that records what it is handed (device, dtype, size, storage address)
before passing it on, for tests that prove where gradients and statistics cross ranks."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from hpcrl.comm import Allreducer


@dataclass(frozen=True)
class Call:
    """One all-reduce: 'average' (gradients) or 'sum' (statistics), and its tensor."""

    op: str
    device: torch.device
    dtype: torch.dtype
    numel: int
    address: int


class RecordingAllreducer(Allreducer):
    """Wraps a real all-reducer; ``calls`` lists every tensor it was given, in order."""

    def __init__(self, inner: Allreducer, calls: list[Call]) -> None:
        self.inner, self.calls = inner, calls
        self.name = f"recording {inner.name}"

    @property
    def size(self) -> int:
        return self.inner.size

    def _record(self, op: str, t: torch.Tensor) -> None:
        self.calls.append(Call(op, t.device, t.dtype, t.numel(), t.data_ptr()))

    def sum_(self, t: torch.Tensor) -> torch.Tensor:
        self._record("sum", t)
        return self.inner.sum_(t)

    def average_(self, flat: torch.Tensor) -> torch.Tensor:
        self._record("average", flat)
        return self.inner.average_(flat)

    def close(self) -> None:
        self.inner.close()
