"""Cross-rank sums and merges used by the learner loops."""
from __future__ import annotations

import numpy as np
import torch

from hpcrl.comm import MpiAllreducer
from hpcrl.roles.layout import Record
from hpcrl.roles.moments import merge_records


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


def combine_infos(rows: np.ndarray, out: Record) -> Record:
    """``out`` := one gradient info from those of several workers (rows of gathered info
    records of ``out``'s layout).

    Sample and env-step counts add up; the version is the newest; progress and loss terms
    are averaged; normaliser moments are merged exactly.
    """
    infos = out.layout.rows(rows)
    out.set(weights_version=max(int(i.weights_version) for i in infos),
            num_samples=sum(int(i.num_samples) for i in infos),
            new_env_steps=sum(int(i.new_env_steps) for i in infos),
            progress=float(np.mean([float(i.progress) for i in infos])),
            stats=np.mean([i.stats for i in infos], axis=0))
    merge_records([i.moments for i in infos], out.moments)
    return out
