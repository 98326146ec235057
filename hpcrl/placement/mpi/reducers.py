"""Cross-rank sums and merges used by the learner loops."""
from __future__ import annotations

import numpy as np
import torch

from hpcrl.comm import MpiAllreducer
from hpcrl.core.normalization import merge_moments
from hpcrl.roles.messages import Gradient


class HostSumReducer:
    """Sums small statistics tensors over the gradient workers through MPI on the host.

    Advantage-normalisation moments are three numbers per minibatch: moving them to the
    CPU costs less than a device collective, and works whatever the device.
    """

    def __init__(self, comm) -> None:
        self.mpi = MpiAllreducer(comm)

    def sum_(self, tensor: torch.Tensor) -> torch.Tensor:
        host = tensor.detach().to("cpu", copy=True).contiguous()
        self.mpi.sum_(host)
        return tensor.copy_(host.to(tensor.device))


def combine_infos(infos: np.ndarray, num_stats: int) -> np.ndarray:
    """One gradient info from those of several workers (rows of ``infos``).

    Sample and env-step counts add up; version, progress and loss terms are averaged;
    normaliser moments are merged exactly.
    """
    h = Gradient.HEADER
    out = infos[0].copy()
    out[0] = infos[:, 0].max()
    out[1] = infos[:, 1].sum()
    out[2] = infos[:, 2].sum()
    out[3] = infos[:, 3].mean()
    out[h:h + num_stats] = infos[:, h:h + num_stats].mean(axis=0)
    parts = [Gradient(np.zeros(1, np.float32), row.copy(), num_stats).moments() for row in infos]
    obs = merge_moments([p[0] for p in parts])
    ret = merge_moments([p[1] for p in parts])
    merged = Gradient(np.zeros(1, np.float32), out, num_stats)
    merged.fill(torch.zeros(1), int(out[0]), int(out[1]), int(out[2]), float(out[3]),
                list(out[h:h + num_stats]), (obs, ret) if obs.count > 0 or ret.count > 0 else None)
    return merged.info

