"""The one contract every algorithm implements, on-policy and off-policy alike.

An algorithm turns a batch into a flat gradient (:meth:`Algorithm.compute_gradients`, which
needs only the weights) and applies flat gradients with its own optimisers
(:meth:`Algorithm.apply_gradients`): that split is what lets gradient ranks and the rank
that updates live in different processes. It declares what it learns from and supports in
:attr:`Algorithm.capabilities`, names the loss terms it reports in
:attr:`Algorithm.stat_names`, follows the run's progress for its schedules, publishes
:attr:`Algorithm.policy` to whoever acts and keeps its state for checkpoints.

The two families derive from it: :class:`~hpcrl.core.algorithms.base.OnPolicyAlgorithm`
(PPO, A2C, IMPALA: batches cut from rollouts, over one actor-critic) and
:class:`~hpcrl.core.algorithms.offpolicy.base.OffPolicyAlgorithm` (DQN, SAC, TD3, DDPG,
MPO: batches sampled from a replay, over several networks with targets). What is common
to both is written here once; what a family adds (minibatches of a rollout, segments and
target networks) is its base's.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import nn

from hpcrl.core.algorithms.capabilities import Capabilities
from hpcrl.core.gradient_guard import GradientGuard

if TYPE_CHECKING:  # annotations only: core does not import config at run time
    from hpcrl.config.schema import AlgoConfig


def linear_schedule(initial: float, kind: str, progress: float) -> float:
    """``initial`` (constant) or ``initial * (1 - progress)`` (linear decay to 0)."""
    return initial * (1.0 - progress) if kind == "linear" else initial


class Algorithm(ABC):
    """A learning rule: gradients of a batch, their application, and what it declares.

    ``capabilities`` is read by the config checks, ``hpcrl plan``, the collectors and the
    placements instead of the algorithm's name; ``stat_names`` lists the loss terms each
    gradient reports, in a fixed order, so they travel as a plain float vector beside the
    gradient and become ``progress.csv`` columns. ``guard`` applies ``train.on_nonfinite``
    to the loss terms and to each gradient applied; ``algo`` is the run's ``algo`` section,
    whose ``lr`` and ``lr_schedule`` give :attr:`learning_rate`. ``constructor_args`` names
    the arguments hpcrl passes the family's constructor, before a plug-in's ``algo.kwargs``.
    """

    stat_names: tuple[str, ...] = ()
    capabilities: ClassVar[Capabilities]  # each family's base or algorithm declares its own
    # the positional arguments hpcrl builds an algorithm of the family with (a plug-in's
    # algo.kwargs come after them): each family's base names its own
    constructor_args: ClassVar[tuple[str, ...]]
    algo: AlgoConfig
    guard: GradientGuard
    progress: float = 0.0

    # -- what the algorithm learns from ------------------------------------------------------
    @property
    @abstractmethod
    def policy(self) -> nn.Module:
        """The module that acts: what collectors and inference ranks receive as weights and
        checkpoints save as the policy."""

    @abstractmethod
    def loss(self, batch: Any) -> tuple[torch.Tensor, dict[str, float]]:
        """The scalar loss of ``batch`` and its terms as floats (named by ``stat_names``)."""

    @abstractmethod
    def compute_gradients(self, batch: Any) -> tuple[torch.Tensor, dict[str, float]]:
        """The flat gradient of :meth:`loss` on ``batch`` and its terms; the weights are
        not changed, so a process without optimisers can compute it."""

    @abstractmethod
    def apply_gradients(self, flat_grads: torch.Tensor) -> dict[str, float]:
        """One optimiser step with ``flat_grads`` (clipped by ``algo.max_grad_norm``);
        returns at least ``grad_norm`` (before clipping) and ``learning_rate``. A
        non-finite gradient is refused by ``guard``: it raises, or the step is dropped."""

    # -- schedules ---------------------------------------------------------------------------
    def set_progress(self, fraction: float) -> None:
        """Tell the schedules how far training is (0 at the start, 1 at the end)."""
        self.progress = min(max(fraction, 0.0), 1.0)

    @property
    def learning_rate(self) -> float:
        """``algo.lr`` under ``algo.lr_schedule`` at the current progress."""
        return linear_schedule(self.algo.lr, self.algo.lr_schedule, self.progress)

    # -- checkpoints -------------------------------------------------------------------------
    @abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps of the algorithm (optimisers, schedules' progress, and
        whatever else the weights alone do not restore)."""

    @abstractmethod
    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved."""
