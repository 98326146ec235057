"""IMPALA-style actor-critic (Espeholt et al. 2018): policy gradient with V-trace targets.

One gradient step on the whole batch of sequences per update. With ``rho_t`` the clipped
importance weight of the learner's policy over the behaviour policy that collected the
data, the loss is

- policy: ``-mean(pg_advantages * log pi(a_t|x_t))`` with the V-trace advantages
  ``rho_t * (r_t + discount_t * vs_{t+1} - V(x_t))``;
- value: ``vf_coef * mean((vs_t - V(x_t))^2)`` towards the V-trace targets ``vs``;
- entropy bonus: ``-ent_coef * mean(entropy)``.

Targets come from :func:`hpcrl.returns.vtrace` with the learner's values (detached), so the
same loss is correct on fresh rollouts (rho = 1) and on rollouts of older policies.
"""
from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.nn.functional as F

from hpcrl.core.algorithms.base import OnPolicyAlgorithm, entropy_bonus
from hpcrl.core.algorithms.capabilities import Capabilities
from hpcrl.core.memory import evaluate_rollouts
from hpcrl.core.vtrace_storage import SequenceBatch, VTraceStorage
from hpcrl.returns import vtrace


class IMPALA(OnPolicyAlgorithm[VTraceStorage, SequenceBatch]):
    """Actor-critic with V-trace off-policy correction, on a :class:`VTraceStorage`."""

    stat_names = ("policy_loss", "value_loss", "entropy", "rho_mean")
    storage = "vtrace"
    capabilities = Capabilities("rollouts", "vtrace", "sampled policy")

    def minibatches(self, storage: VTraceStorage, update: int, seed: int, total_envs: int,
                    count: int) -> Iterator[SequenceBatch]:
        """All the stored sequences as one batch ``[T, N, ...]``: one V-trace step per update."""
        yield storage.full_batch()

    def steps_per_update(self, count: int) -> int:
        """1, whatever ``count``: one step on the full batch."""
        return 1

    def loss(self, batch: SequenceBatch) -> tuple[torch.Tensor, dict[str, float]]:
        """The V-trace policy-gradient, value and entropy terms of the module docstring on a
        ``[T, N]`` batch (a recurrent actor replayed from its stored start states); ``rho_mean``
        reports the mean unclipped importance weight."""
        cfg = self.config
        steps, envs = batch.rewards.shape
        # a recurrent actor (memory and starts are set together): sequences from their
        # start states
        if batch.memory is not None and batch.starts is not None:
            log_probs, entropy, values = evaluate_rollouts(self.actor, batch.obs, batch.actions,
                                                           batch.memory, batch.starts,
                                                           batch.sequence_length)
        else:
            log_probs, entropy, values = self.actor.evaluate(batch.obs.flatten(0, 1),
                                                             batch.actions.flatten(0, 1))
            log_probs = log_probs.view(steps, envs)
            values = values.view(steps, envs)
        log_rhos = log_probs.detach() - batch.log_probs
        vs, pg_advantages = vtrace(log_rhos, batch.discounts, batch.rewards, values.detach(),
                                   batch.bootstrap, cfg.impala.clip_rho, cfg.impala.clip_c)
        policy_loss = -(pg_advantages * log_probs).mean()
        value_loss = F.mse_loss(values, vs)
        bonus, entropy_mean = entropy_bonus(entropy, cfg.ent_coef)
        loss = policy_loss + cfg.vf_coef * value_loss - bonus
        return loss, {"policy_loss": policy_loss.item(), "value_loss": value_loss.item(),
                      "entropy": entropy_mean.item(), "rho_mean": log_rhos.exp().mean().item()}
