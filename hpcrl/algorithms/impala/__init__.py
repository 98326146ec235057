"""IMPALA: the V-trace clips of ``algo.impala.*`` (here, torch-free) and the learner,
:class:`~hpcrl.algorithms.impala.vtrace_learner.IMPALA`."""
from __future__ import annotations

from dataclasses import dataclass

from hpcrl.field_docs import doc


@dataclass
class ImpalaConfig:
    """IMPALA's V-trace clips (``algo.impala.*``)."""

    clip_rho: float | None = doc(
        "V-trace rho-bar, the clip of the importance weights in the TD errors and "
        "policy-gradient advantages (null: no clip).", 1.0)
    clip_c: float | None = doc("V-trace c-bar, the clip of the trace coefficients (null: no "
                               "clip).", 1.0)
