"""The normaliser moments a gradient carries, as one named-field record.

Observation moments (count, mean, M2 per observation value) and return moments (count,
mean, M2) of the rollouts behind an update. They cross ranks inside the gradient info,
are summed over the gradient workers (:meth:`MomentsRecord.to_sums_`, an all-reduce of
:meth:`MomentsRecord.block`, :meth:`MomentsRecord.from_sums_`) or merged exactly on an
updater (:func:`merge_records`). This is the one place that knows how they are packed.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from hpcrl.core.normalization import Moments, merge_moments
from hpcrl.roles.layout import Record, RecordLayout

GROUPS = ("obs", "ret")


def moments_layout(obs_dim: int) -> RecordLayout:
    """Count, mean and M2 of the observations (``obs_dim`` values) and of the returns."""
    f8 = np.float64
    return RecordLayout([("obs_count", (), f8), ("obs_mean", (obs_dim,), f8),
                         ("obs_m2", (obs_dim,), f8),
                         ("ret_count", (), f8), ("ret_mean", (1,), f8), ("ret_m2", (1,), f8)],
                        record_type=MomentsRecord)


class MomentsRecord(Record):
    """Moments of observations and returns (counts 0: this gradient carries none)."""

    def write(self, moments: tuple[Moments, Moments] | None) -> "MomentsRecord":
        """Store ``(observation moments, return moments)``; ``None`` stores none."""
        if moments is None:
            self.obs_count[...] = 0.0
            self.ret_count[...] = 0.0
            return self
        for group, m in zip(GROUPS, moments):
            self[f"{group}_count"][...] = m.count
            self[f"{group}_mean"][:] = np.reshape(m.mean, -1)
            self[f"{group}_m2"][:] = np.reshape(m.m2, -1)
        return self

    def read(self) -> tuple[Moments, Moments]:
        """``(observation moments, return moments)``, copies (count 0: none)."""
        obs = Moments(float(self.obs_count), self.obs_mean.copy(), self.obs_m2.copy())
        ret = Moments(float(self.ret_count), np.float64(self.ret_mean[0]),
                      np.float64(self.ret_m2[0]))
        return obs, ret

    @property
    def carried(self) -> bool:
        return float(self.obs_count) > 0 or float(self.ret_count) > 0

    def block(self) -> np.ndarray:
        """Every field as one float64 vector (a view), for a single all-reduce."""
        return self.data.view(np.float64)

    def to_sums_(self) -> "MomentsRecord":
        """Turn (count, mean, M2) into (count, sum, sum of squares), which add up over ranks."""
        for group in GROUPS:
            count, mean, m2 = (self[f"{group}_{k}"] for k in ("count", "mean", "m2"))
            m2 += count * mean * mean
            mean *= count
        return self

    def from_sums_(self) -> "MomentsRecord":
        """The inverse of :meth:`to_sums_` (on summed values: the moments of the union)."""
        for group in GROUPS:
            count, total, total_sq = (self[f"{group}_{k}"] for k in ("count", "mean", "m2"))
            m = Moments.from_sums(float(count), total.copy(), total_sq.copy())
            total[:], total_sq[:] = m.mean, m.m2
        return self


def merge_records(parts: Sequence[MomentsRecord], out: MomentsRecord) -> None:
    """``out`` := the exact merge of ``parts`` (none carried: ``out`` carries none)."""
    obs, ret = zip(*(p.read() for p in parts))
    merged = (merge_moments(list(obs)), merge_moments(list(ret)))
    out.write(merged if merged[0].count > 0 or merged[1].count > 0 else None)
