"""An off-policy algorithm of your own: Munchausen DQN, a subclass of hpcrl's DQN.

    PYTHONPATH=examples hpcrl train examples/munchausen-dqn.yaml              # one process
    PYTHONPATH=examples mpiexec -n 3 hpcrl train examples/munchausen-dqn.yaml \\
        --set scheme.preset=apex            # Ape-X: 1 learner, 2 collectors

Munchausen DQN (Vieillard, Pietquin and Geist, NeurIPS 2020) changes only DQN's target: it
bootstraps from the soft value of the target network's Boltzmann policy
``pi = softmax(q_target / tau)`` and adds the scaled, clipped log-probability of the action
taken, ``alpha * clip(tau * log pi(a|s), log_clip, 0)``, to the reward. With ``alpha = 0``
and ``tau -> 0`` it is DQN without double Q-learning.

A plug-in off-policy algorithm derives from a built-in (``hpcrl.DQN``, ``hpcrl.SAC``,
``hpcrl.TD3``, ``hpcrl.DDPG``, ``hpcrl.MPO``) or from ``hpcrl.OffPolicyAlgorithm``, and
inherits its base's declared capabilities, defaults (``hpcrl config show`` lists them) and
schemes (serial, ``apex``, ``async-sac``). hpcrl builds every algorithm alike, as
``Class(spaces, settings, device, reducer, **algo.kwargs)``. Every rank imports it by its path
(``munchausen_dqn:MunchausenDQN``), as does ``hpcrl eval``, which rebuilds its policy with
the class's ``acting_policy``: keep this directory on PYTHONPATH there too.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

import hpcrl


class MunchausenDQN(hpcrl.DQN):
    """DQN's networks, replay and schedule; the Munchausen target (no double Q-learning)."""

    stat_names = hpcrl.DQN.stat_names + ("munchausen_bonus",)

    def __init__(self, spaces, settings, device="cpu", reducer=None, *,
                 entropy_tau: float = 0.03, alpha: float = 0.9, log_clip: float = -1.0
                 ) -> None:
        super().__init__(spaces, settings, device, reducer)
        if entropy_tau <= 0 or not 0 <= alpha <= 1 or log_clip >= 0:
            raise ValueError(f"MunchausenDQN needs entropy_tau > 0, 0 <= alpha <= 1 and "
                             f"log_clip < 0, got {entropy_tau}, {alpha}, {log_clip}")
        self.entropy_tau, self.alpha, self.log_clip = entropy_tau, alpha, log_clip

    def munchausen_target(self, batch: hpcrl.ReplayBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """The regression target of ``Q(s, a)`` and the Munchausen bonus it includes."""
        tau, target_q = self.entropy_tau, self.target_q.module
        log_pi = F.log_softmax(target_q.q_values(batch.obs) / tau, dim=1)
        taken = log_pi.gather(1, batch.actions.unsqueeze(1)).squeeze(1)
        bonus = self.alpha * (tau * taken).clamp(self.log_clip, 0.0)
        next_q = target_q.q_values(batch.next_obs)
        next_log_pi = F.log_softmax(next_q / tau, dim=1)
        soft_value = (next_log_pi.exp() * (next_q - tau * next_log_pi)).sum(dim=1)
        return batch.rewards + bonus + batch.discounts * soft_value, bonus

    def loss(self, batch):
        q = self.q.q_values(batch.obs).gather(1, batch.actions.unsqueeze(1)).squeeze(1)
        with torch.no_grad():
            target, bonus = self.munchausen_target(batch)
        if batch.weights is None:
            loss = F.smooth_l1_loss(q, target)
        else:  # prioritised replay: importance weights, and the TD errors for priorities
            loss = (batch.weights * F.smooth_l1_loss(q, target, reduction="none")).mean()
            self.remember_td_errors(q - target)
        return loss, {"q_loss": loss.item(), "q_mean": q.mean().item(),
                      "munchausen_bonus": bonus.mean().item()}
