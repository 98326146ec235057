"""An off-policy algorithm of your own with keys of its own: clipped double DQN.

    PYTHONPATH=examples hpcrl train --set algo.name=clipped_double_dqn:ClippedDoubleDQN \\
        --set algo.cdq.min_weight=1.0
    PYTHONPATH=examples mpiexec -n 3 hpcrl train --set scheme.preset=apex \\
        --set algo.name=clipped_double_dqn:ClippedDoubleDQN

DQN's target overestimates: the maximum of noisy estimates is biased upwards. Clipped
double Q-learning (Fujimoto, van Hoof and Meger 2018, TD3's critics) trains two Q-networks
on one target, the minimum of their two target networks' values of the next action, which
errs low instead. Here, for discrete actions: the next action is the online first network's
greedy one under ``algo.cdq.double_q`` (else the target minimum's), and the target mixes the
two target values, ``min_weight x min + (1 - min_weight) x mean`` (1: the clipped target;
0: the ensemble mean, double DQN's in expectation). ``algo.cdq.loss`` picks the Huber loss
(DQN's) or the squared error. The collectors act epsilon-greedily on the first network.

One module and its registration are all it needs: ``section`` names its config section
(``algo.cdq``), whose dataclass ``section_keys`` derives from DQN's keys, so it explores
with ``algo.cdq.exploration_*`` and the ``apex`` preset's keys land there;
``section_problem`` states the range rule of its own key; and hpcrl builds it, like every
algorithm, as ``Class(spaces, settings, device, reducer)``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

import hpcrl
from hpcrl.algorithms.dqn import DqnConfig
from hpcrl.models.target import TargetNetwork
from hpcrl.numerics.compiling import stat_floats


@dataclass
class ClippedDoubleConfig(DqnConfig):
    """Clipped double DQN's keys (``algo.cdq.*``): DQN's, and the target's mix and loss."""

    min_weight: float = 1.0
    """Weight of the two target networks' minimum in the target (the rest: their mean)."""
    loss: Literal["huber", "mse"] = "huber"
    """The regression loss of each Q-network to the target."""


class ClippedDoubleDQN(hpcrl.DQN):
    """Two Q-networks (segments ``q`` and ``q2``), each with its target, on one target."""

    section, section_keys = "cdq", ClippedDoubleConfig  # algo.cdq.*, its keys
    stat_names = ("q_loss", "q_mean", "target_gap")  # target_gap: |Q'_1 - Q'_2| at a*

    @classmethod
    def section_problem(cls, own: ClippedDoubleConfig) -> str | None:
        """``min_weight`` is a weight in [0, 1]."""
        if not 0.0 <= own.min_weight <= 1.0:
            return f"config key 'algo.cdq.min_weight' must be in [0, 1], got {own.min_weight}"
        return None

    def build(self) -> list[tuple[str, nn.Module]]:
        """DQN's Q-network (segment ``q``, the one that acts) and a second one (``q2``),
        each with its target."""
        parts = super().build()
        self.q2 = type(self).acting_policy(self.spaces, self.settings.actor)
        self.target_q2 = TargetNetwork(self.q2)
        self.targets["q2"] = self.target_q2
        return [*parts, ("q2", self.q2)]

    def loss(self, batch: hpcrl.ReplayBatch) -> tuple[torch.Tensor, dict[str, float]]:
        """Both networks' loss to ``r + discount x target(s')``, the target mixing the
        minimum and the mean of the two target networks' values of the next action."""
        taken = batch.actions.unsqueeze(1)
        q1 = self.q.q_values(batch.obs).gather(1, taken).squeeze(1)
        q2 = self.q2.q_values(batch.obs).gather(1, taken).squeeze(1)
        with torch.no_grad():
            next1 = self.target_q.module.q_values(batch.next_obs)
            next2 = self.target_q2.module.q_values(batch.next_obs)
            chooser = self.q.q_values(batch.next_obs) if self.own.double_q \
                else torch.minimum(next1, next2)
            best = chooser.argmax(dim=1, keepdim=True)
            both = torch.stack([next1.gather(1, best), next2.gather(1, best)]).squeeze(2)
            w = self.own.min_weight
            value = w * both.min(dim=0).values + (1 - w) * both.mean(dim=0)
            target = batch.rewards + batch.discounts * value
        error = F.smooth_l1_loss if self.own.loss == "huber" else F.mse_loss
        per_row = error(q1, target, reduction="none") + error(q2, target, reduction="none")
        if batch.weights is None:
            loss = per_row.mean()
        else:  # prioritised replay: importance weights, and the first network's TD errors
            loss = (batch.weights * per_row).mean()
            self.remember_td_errors(q1 - target)
        gap = (both[0] - both[1]).abs().mean()
        return loss, stat_floats(self.stat_names, [loss, q1.detach().mean(), gap])

    def stepping(self, step: int) -> list[str]:
        """Both networks step every time."""
        return ["q", "q2"]

    def update_targets(self, step: int) -> None:
        """DQN's rule for both targets: towards their networks by ``replay.tau`` every
        ``replay.target_update_interval`` steps."""
        if step % self.replay.target_update_interval == 0:
            for name in ("q", "q2"):
                self.targets[name].update(self.segment_params(name), self.replay.tau)
