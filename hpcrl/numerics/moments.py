"""The normaliser moments a gradient carries, as one named-field record.

Observation moments (count, mean, M2 per observation value) and return moments (count,
mean, M2) of the rollouts behind an update; with RND also those of the predictor's inputs
and of the raw intrinsic returns. They cross ranks inside the gradient info, are summed over
the gradient workers (:meth:`MomentsRecord.to_sums_`, an all-reduce of
:meth:`MomentsRecord.block`, :meth:`MomentsRecord.from_sums_`) or merged exactly on an
updater (:func:`merge_records`). This is the one place that knows how they are packed.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hpcrl.numerics.normalization import Moments, merge_moments
from hpcrl.numerics.records import Record, RecordLayout

GROUPS = ("obs", "ret")
RND_GROUPS = ("rnd_obs", "rnd_ret")  # RND's inputs and raw intrinsic returns


def moments_layout(obs_dim: int, rnd_dim: int = 0) -> RecordLayout[MomentsRecord]:
    """Count, mean and M2 of the observations (``obs_dim`` values) and of the returns; with
    ``rnd_dim`` (RND's input values) also of RND's inputs and intrinsic returns."""
    f8 = np.float64
    sizes = [("obs", obs_dim), ("ret", 1)]
    if rnd_dim:
        sizes += [("rnd_obs", rnd_dim), ("rnd_ret", 1)]
    fields = []
    for group, size in sizes:
        fields += [(f"{group}_count", (), f8), (f"{group}_mean", (size,), f8),
                   (f"{group}_m2", (size,), f8)]
    return RecordLayout(fields, record_type=MomentsRecord)


class MomentsRecord(Record):
    """Moments of observations and returns, and RND's when it has those fields (counts 0:
    this gradient carries none). Groups are read and written in :attr:`groups` order."""

    @property
    def groups(self) -> tuple[str, ...]:
        """The groups this record holds: :data:`GROUPS`, then :data:`RND_GROUPS` with RND."""
        return GROUPS + (RND_GROUPS if "rnd_obs_count" in self.layout.names else ())

    def write(self, moments: Sequence[Moments] | None) -> MomentsRecord:
        """Store one :class:`Moments` per group (the record's scalar groups take a scalar
        mean); ``None`` stores none."""
        if moments is None:
            for group in self.groups:
                self[f"{group}_count"][...] = 0.0
            return self
        if len(moments) != len(self.groups):
            raise ValueError(f"moments of {len(moments)} groups for a record of "
                             f"{', '.join(self.groups)}")
        for group, m in zip(self.groups, moments, strict=True):
            self[f"{group}_count"][...] = m.count
            self[f"{group}_mean"][:] = np.reshape(m.mean, -1)
            self[f"{group}_m2"][:] = np.reshape(m.m2, -1)
        return self

    def read(self) -> tuple[Moments, ...]:
        """One :class:`Moments` per group, copies (count 0: none); return groups (one value)
        as scalars."""
        out = []
        for group in self.groups:
            count = float(self[f"{group}_count"])
            mean, m2 = self[f"{group}_mean"], self[f"{group}_m2"]
            if group.endswith("ret"):
                out.append(Moments(count, np.float64(mean[0]), np.float64(m2[0])))
            else:
                out.append(Moments(count, mean.copy(), m2.copy()))
        return tuple(out)

    @property
    def carried(self) -> bool:
        """Whether any group holds moments (a count above 0)."""
        return any(float(self[f"{group}_count"]) > 0 for group in self.groups)

    def block(self) -> np.ndarray:
        """Every field as one float64 vector (a view), for a single all-reduce."""
        return self.data.view(np.float64)

    def to_sums_(self) -> MomentsRecord:
        """Turn (count, mean, M2) into (count, sum, sum of squares), which add up over ranks."""
        for group in self.groups:
            count, mean, m2 = (self[f"{group}_{k}"] for k in ("count", "mean", "m2"))
            m2 += count * mean * mean
            mean *= count
        return self

    def from_sums_(self) -> MomentsRecord:
        """The inverse of :meth:`to_sums_` (on summed values: the moments of the union)."""
        for group in self.groups:
            count, total, total_sq = (self[f"{group}_{k}"] for k in ("count", "mean", "m2"))
            m = Moments.from_sums(float(count), total.copy(), total_sq.copy())
            total[:], total_sq[:] = m.mean, m.m2
        return self


def merge_records(parts: Sequence[MomentsRecord], out: MomentsRecord) -> None:
    """``out`` := the exact merge of ``parts`` (none carried: ``out`` carries none)."""
    groups = list(zip(*(p.read() for p in parts), strict=True))
    merged = tuple(merge_moments(list(g)) for g in groups)
    out.write(merged if any(m.count > 0 for m in merged) else None)
