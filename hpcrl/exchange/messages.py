"""Messages between roles: flat buffers that any transport can carry, with no per-tensor parts.

- :class:`~hpcrl.buffers.rollout.Rollout`: collector -> gradient worker.
- :class:`Gradient`: gradient worker -> updater (a flat gradient tensor on the learner's
  device plus a host info record).
- :class:`Weights`: updater -> gradient workers and collectors (a header record with the
  job-control command, the version and the module's buffers; then the parameters).

Every fixed-size part is a named-field record (:mod:`hpcrl.numerics.records`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from hpcrl.numerics.flat import (
    buffers_to_flat,
    flat_to_buffers,
    flat_to_params,
    num_buffer_values,
    num_params,
    params_to_flat,
)
from hpcrl.numerics.moments import MomentsRecord, moments_layout
from hpcrl.numerics.normalization import Moments
from hpcrl.numerics.records import Record, RecordLayout

if TYPE_CHECKING:
    from hpcrl.models.actor import ActorCritic

# commands a weights message carries to collectors (bit flags); ENV_FAILED rides with
# PREEMPTED when the stop is for an env that failed for good (every rank then leaves with
# that exit status: MPICH's mpiexec ORs the ranks' statuses). RELOAD rides with STOP when a
# population member ends its roles to go on from a copied checkpoint (hpcrl.population)
COLLECT, STOP, CHECKPOINT, PREEMPTED, ENV_FAILED, RELOAD = 0, 1, 2, 4, 8, 16


class WeightsHeader(Record):
    """The header record of a weights message (:func:`weights_header_layout`): its fields,
    declared for the type checker; each is a view of the record's buffer."""

    command: np.ndarray  # int64 scalar: COLLECT, or STOP/CHECKPOINT/PREEMPTED bits
    version: np.ndarray  # int64 scalar: the updater's step count
    buffers: np.ndarray  # float64 [num_buffer_values]: the module's buffers


def weights_header_layout(num_buffer_values: int) -> RecordLayout[WeightsHeader]:
    """The header of a weights message: the job-control command (:data:`COLLECT`, or
    :data:`STOP`/:data:`CHECKPOINT`/:data:`PREEMPTED` bits: stop because a stop signal came,
    not because training ended), the version, and the module's buffers (float64)."""
    return RecordLayout([("command", (), np.int64), ("version", (), np.int64),
                         ("buffers", (num_buffer_values,), np.float64)],
                        record_type=WeightsHeader)


@dataclass
class Weights:
    """A version of the actor, as two buffers: ``header`` (a record of
    :func:`weights_header_layout`, sent first) and ``params`` (float32)."""

    params: np.ndarray
    header: WeightsHeader

    @staticmethod
    def new(num_params_: int, num_buffer_values: int, pinned: bool = False) -> Weights:
        """A message of zeros for a module of these sizes (``pinned``: its parameters in
        page-locked memory, for a module on a GPU: copies to and from it are faster)."""
        params = (torch.zeros(num_params_, dtype=torch.float32, pin_memory=True).numpy()
                  if pinned else np.zeros(num_params_, np.float32))
        return Weights(params, weights_header_layout(num_buffer_values).new())

    @staticmethod
    def empty_like(module: nn.Module) -> Weights:
        """A message for ``module``, pinned when the module lies on a GPU: weights leave a
        GPU learner only through this host buffer, to be sent to collectors or ranks."""
        on_gpu = any(p.is_cuda for p in module.parameters())
        return Weights.new(num_params(module), num_buffer_values(module), pinned=on_gpu)

    def copy(self) -> Weights:
        """A message with buffers of its own holding the same values."""
        return Weights(self.params.copy(), self.header.layout.wrap(self.header.data.copy()))

    def copy_from(self, other: Weights) -> Weights:
        """Copy ``other``'s parameters and header into this message's buffers; returns it."""
        self.params[:] = other.params
        self.header.copy_from(other.header)
        return self

    @property
    def buffers(self) -> np.ndarray:
        """The module's floating-point buffers (normaliser statistics)."""
        return self.header.buffers

    @property
    def version(self) -> int:
        """The weights' version (the updater's step count)."""
        return int(self.header.version)

    @property
    def command(self) -> int:
        """The job-control command: :data:`COLLECT` or a set of bits."""
        return int(self.header.command)

    def set_command(self, command: int) -> Weights:
        """Set the command in the header; returns the message."""
        self.header.set(command=command)
        return self

    def capture(self, module: nn.Module, version: int, command: int = COLLECT) -> Weights:
        """Write ``module``'s current parameters and buffers into this message."""
        params_to_flat(module, torch.from_numpy(self.params))
        buffers_to_flat(module, torch.from_numpy(self.header.buffers))
        self.header.set(command=command, version=version)
        return self

    def load_into(self, module: nn.Module) -> None:
        """Copy this version into ``module``."""
        flat_to_params(module, torch.from_numpy(self.params))
        self.load_buffers_into(module)

    def load_buffers_into(self, module: nn.Module) -> None:
        """Copy only the header's buffers (the normaliser statistics) into ``module``: what a
        collector that acts on an inference rank needs of a new version."""
        flat_to_buffers(module, torch.from_numpy(self.header.buffers))


class GradientInfo(Record):
    """The info record beside a gradient (:func:`gradient_info_layout`): its fields,
    declared for the type checker; each is a view of the record's buffer."""

    weights_version: np.ndarray  # int64 scalar
    num_samples: np.ndarray  # int64 scalar
    new_env_steps: np.ndarray  # int64 scalar
    progress: np.ndarray  # float64 scalar
    stats: np.ndarray  # float64 [num_stats]
    moments: MomentsRecord  # a nested record over its part of the buffer


def gradient_info_layout(num_stats: int, obs_dim: int,
                         rnd_dim: int = 0) -> RecordLayout[GradientInfo]:
    """What travels beside a gradient: the weights version it was computed with, its
    samples, the env steps its rollouts added (non-zero on the first gradient of an update
    only), the training progress in [0, 1] that sets the schedules, the algorithm's loss
    terms (``stat_names`` order) and the normaliser moments of the rollouts (carried by the
    first gradient of an update only; with RND's, ``rnd_dim`` values per input)."""
    return RecordLayout([("weights_version", (), np.int64), ("num_samples", (), np.int64),
                         ("new_env_steps", (), np.int64), ("progress", (), np.float64),
                         ("stats", (num_stats,), np.float64),
                         ("moments", moments_layout(obs_dim, rnd_dim))],
                        record_type=GradientInfo)


@dataclass
class Gradient:
    """One optimiser step's worth of gradient and its ``info`` record
    (:func:`gradient_info_layout`), two separate buffers.

    ``grads`` is a flat float32 tensor on the device where the gradient is computed or
    applied: a gradient worker's message holds the very tensor backward wrote into (no
    copy), so an all-reduce and the optimiser step work on it where it lies. Only a
    transport that moves host memory (an MPI send, reduce or receive) goes through
    :meth:`host`. The info record always stays on the host.
    """

    grads: torch.Tensor
    info: GradientInfo
    stage: torch.Tensor | None = None  # pinned host copy of a device gradient

    @staticmethod
    def empty(num_params_: int, num_stats: int, obs_dim: int,
              device: torch.device | str = "cpu", rnd_dim: int = 0) -> Gradient:
        """A zero gradient; ``device`` is where it will be applied (a CPU gradient to be
        received for a GPU learner is pinned, so its copy to the device is asynchronous)."""
        device = torch.device(device)
        grads = (torch.zeros(num_params_, dtype=torch.float32, device=device)
                 if device.type != "cuda" else
                 torch.zeros(num_params_, dtype=torch.float32, pin_memory=True))
        return Gradient(grads, gradient_info_layout(num_stats, obs_dim, rnd_dim).new())

    @staticmethod
    def for_actor(actor: ActorCritic, num_stats: int,
                  device: torch.device | str = "cpu") -> Gradient:
        """:meth:`empty` sized for ``actor``: its parameters, its observation statistics and
        (an actor with RND) those of its predictor's inputs."""
        rnd = getattr(actor, "rnd", None)
        return Gradient.empty(num_params(actor), num_stats, int(actor.obs_rms.mean.numel()),
                              device, 0 if rnd is None else int(rnd.obs_rms.mean.numel()))

    @property
    def weights_version(self) -> int:
        """The version of the weights the gradient was computed with."""
        return int(self.info.weights_version)

    @property
    def num_samples(self) -> int:
        """Samples the gradient was computed on."""
        return int(self.info.num_samples)

    @property
    def new_env_steps(self) -> int:
        """Env steps the update's rollouts added (non-zero on its first gradient only)."""
        return int(self.info.new_env_steps)

    @property
    def progress(self) -> float:
        """Training progress in [0, 1] the schedules are set to before applying it."""
        return float(self.info.progress)

    @property
    def moments(self) -> MomentsRecord:
        """The normaliser moments this gradient carries (counts 0: none)."""
        return self.info.moments

    def stats(self) -> np.ndarray:
        """The loss terms ``[num_stats]`` in ``stat_names`` order (a view)."""
        return self.info.stats

    def host(self) -> np.ndarray:
        """The gradient as a host array, for a transport that moves host memory only: a
        view of ``grads`` when it lies on the CPU, else a copy into a pinned buffer kept
        for the purpose (the one device-to-host copy a central or asynchronous updater
        costs a GPU worker)."""
        if self.grads.device.type == "cpu":
            return self.grads.numpy()
        if self.stage is None or self.stage.numel() != self.grads.numel():
            self.stage = torch.empty(self.grads.numel(), dtype=self.grads.dtype,
                                     pin_memory=True)
        self.stage.copy_(self.grads)
        return self.stage.numpy()

    def fill(self, grads: torch.Tensor, weights_version: int, num_samples: int,
             new_env_steps: int, progress: float, stats: list[float],
             moments: tuple[Moments, ...] | None) -> Gradient:
        """This message now carries ``grads`` (the tensor itself, valid until the worker
        computes its next gradient) and the info given."""
        self.grads = grads.detach()
        info = self.info  # once per gradient step: fields written directly
        info.weights_version[...] = weights_version
        info.num_samples[...] = num_samples
        info.new_env_steps[...] = new_env_steps
        info.progress[...] = progress
        info.stats[:] = stats
        info.moments.write(moments)
        return self
