"""IMPALA-style actor-critic (Espeholt et al. 2018): policy gradient with V-trace targets.

One gradient step on the whole batch of sequences per update. With ``rho_t`` the clipped
importance weight of the learner's policy over the behaviour policy that collected the
data, the loss is

- policy: ``-mean(pg_advantages * log pi(a_t|x_t))`` with the V-trace advantages
  ``rho_t * (r_t + discount_t * vs_{t+1} - V(x_t))``;
- value: ``vf_coef * mean((vs_t - V(x_t))^2)`` towards the V-trace targets ``vs``;
- entropy bonus: ``-ent_coef * mean(entropy)``.

Targets come from :func:`hpcrl.buffers.returns.vtrace` with the learner's values (detached), so the
same loss is correct on fresh rollouts (rho = 1) and on rollouts of older policies.
"""
from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.nn.functional as F

from hpcrl.algorithms.addons import PolicyOutputs
from hpcrl.algorithms.capabilities import Capabilities
from hpcrl.algorithms.impala import ImpalaConfig
from hpcrl.algorithms.key_rules import clip_or_null
from hpcrl.algorithms.on_policy import OnPolicyAlgorithm, entropy_bonus
from hpcrl.buffers.returns import vtrace
from hpcrl.buffers.vtrace_storage import SequenceBatch, VTraceStorage
from hpcrl.models.actor import ActorOutputs
from hpcrl.models.memory import rollout_outputs
from hpcrl.numerics.compiling import stat_floats


class IMPALA(OnPolicyAlgorithm[VTraceStorage, SequenceBatch]):
    """Actor-critic with V-trace off-policy correction, on a :class:`VTraceStorage`."""

    kind = "impala"
    section = "impala"
    section_keys = ImpalaConfig
    # V-trace actor-critic: the values the impala preset's CartPole test learns with
    defaults = {"env.num_envs": 8, "actor.hidden_sizes": [64, 64], "actor.activation": "tanh",
                "actor.ortho_init": True, "algo.num_steps": 32, "algo.gamma": 0.98,
                "algo.lr": 1e-3, "algo.lr_schedule": "linear", "algo.max_grad_norm": 0.5,
                "algo.optimizer": "adam", "algo.optimizer_eps": 1e-5, "algo.ent_coef": 0.0,
                "algo.vf_coef": 0.5}
    section_rules = (("clip_rho", clip_or_null), ("clip_c", clip_or_null))
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
        cfg = self.algo
        out = self.evaluate_sequences(batch)
        log_probs, entropy, values = out.log_probs, out.entropy, out.values
        log_rhos, vs, pg_advantages = self.targets(batch, log_probs, values)
        if self.addons is not None:
            self._outputs = self.outputs_for_addons(batch, out, vs)
        policy_loss = -(pg_advantages * log_probs).mean()
        value_loss = F.mse_loss(values, vs)
        bonus, entropy_mean = entropy_bonus(entropy, cfg.ent_coef)
        loss = policy_loss + cfg.vf_coef * value_loss - bonus
        return loss, stat_floats(("policy_loss", "value_loss", "entropy", "rho_mean"),
                                 [policy_loss, value_loss, entropy_mean,
                                  log_rhos.detach().exp().mean()])

    def evaluate_sequences(self, batch: SequenceBatch) -> ActorOutputs:
        """The actor's outputs ``[T, N, ...]`` on the batch's sequences (a recurrent actor's
        recomputed from their stored start states), with the predictors' when there are
        policy-loss add-ons."""
        steps, envs = batch.rewards.shape
        predict = self.addons is not None
        # a recurrent actor (memory and starts are set together): sequences from their
        # start states
        if batch.memory is not None and batch.starts is not None:
            return rollout_outputs(self.actor, batch.obs, batch.actions, batch.memory,
                                   batch.starts, batch.sequence_length, predict)
        out = self.actor.evaluate_outputs(batch.obs.flatten(0, 1), batch.actions.flatten(0, 1),
                                          predict)
        return out.map(lambda x: x.view((steps, envs) + x.shape[1:]))

    def targets(self, batch: SequenceBatch, log_probs: torch.Tensor, values: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The log importance weights, V-trace targets ``vs`` and policy-gradient advantages
        ``[T, N]`` of the learner's log-probs and values (both taken as constants)."""
        log_rhos = log_probs.detach() - batch.log_probs
        vs, pg_advantages = vtrace(log_rhos, batch.discounts, batch.rewards, values.detach(),
                                   batch.bootstrap, self.own.clip_rho,
                                   self.own.clip_c)
        return log_rhos, vs, pg_advantages

    @staticmethod
    def outputs_for_addons(batch: SequenceBatch, out: ActorOutputs, vs: torch.Tensor
                           ) -> PolicyOutputs:
        """What the policy-loss add-ons read of the sequences, flattened: the V-trace
        targets are the returns a return predictor learns."""
        def flat(x: torch.Tensor | None) -> torch.Tensor | None:
            return None if x is None else x.flatten(0, 1)

        params = out.params.flatten(0, 1)
        return PolicyOutputs(batch.obs.flatten(0, 1), params, flat(out.predictions),
                             flat(batch.step_rewards), vs.flatten())

    def addon_outputs(self, batch: SequenceBatch) -> PolicyOutputs:
        """One more evaluation of the sequences and their V-trace targets, for a plug-in
        whose loss left the add-ons nothing."""
        out = self.evaluate_sequences(batch)
        _, vs, _ = self.targets(batch, out.log_probs, out.values)
        return self.outputs_for_addons(batch, out, vs)
