"""How a central updater merges the info records of several workers' gradients."""
from __future__ import annotations

import numpy as np

from hpcrl.exchange.messages import GradientInfo
from hpcrl.numerics.moments import merge_records


def combine_infos(rows: np.ndarray, out: GradientInfo) -> GradientInfo:
    """``out`` := one gradient info from those of several workers (rows of gathered info
    records of ``out``'s layout).

    Sample and env-step counts add up; the version is the newest; progress and loss terms
    are averaged; normaliser moments are merged exactly.
    """
    infos: list[GradientInfo] = out.layout.rows(rows)
    out.set(weights_version=max(int(i.weights_version) for i in infos),
            num_samples=sum(int(i.num_samples) for i in infos),
            new_env_steps=sum(int(i.new_env_steps) for i in infos),
            progress=float(np.mean([float(i.progress) for i in infos])),
            stats=np.mean([i.stats for i in infos], axis=0))
    merge_records([i.moments for i in infos], out.moments)
    return out
