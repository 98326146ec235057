"""SAC (Haarnoja et al. 2018) with twin critics and automatic temperature.

All three losses are taken at the same weights and summed; each reaches only its own
segment (``policy``, ``critic``, ``log_alpha``):

- critic: ``0.5 * sum_k mean((Q_k(s, a) - y)^2)`` with
  ``y = r + discount * (min_k Q_target_k(s', a') - alpha * log pi(a'|s'))``, ``a' ~ pi(s')``;
- policy: ``mean(alpha * log pi(a~|s) - min_k Q_k(s, a~))``, ``a~ ~ pi(s)``, the critics
  evaluated with detached weights;
- temperature: ``-mean(log_alpha * (log pi(a~|s) + target_entropy))`` (detached log-probs),
  when ``algo.sac.learn_ent_coef``; ``alpha = exp(log_alpha)`` is detached everywhere else.

The target critics move by ``replay.tau`` every ``replay.target_update_interval`` steps.

Taking every loss at one version of the weights is what lets a gradient worker compute a
step's whole gradient; Stable-Baselines3 instead steps the critic before it takes the policy
loss, so its policy sees a critic one step newer. On Pendulum-v1 with the same recipe both
reach the same returns (benchmarks/offpolicy_vs_sb3.py).
"""
from __future__ import annotations

import math

import torch
from torch import nn

from hpcrl.algorithms.key_rules import positive
from hpcrl.algorithms.off_policy import (
    CONTINUOUS_DEFAULTS,
    OffPolicyAlgorithm,
    Scalar,
    continuous_control,
    squashed_gaussian,
)
from hpcrl.algorithms.sac import SacConfig
from hpcrl.buffers.replay.buffer import ReplayBatch
from hpcrl.envs.vector import EnvSpaces, as_box
from hpcrl.models.continuous_policies import SquashedGaussianPolicy
from hpcrl.models.critics import EnsembleCritic
from hpcrl.models.target import TargetNetwork
from hpcrl.numerics.compiling import stat_floats
from hpcrl.sections.schema import ActorConfig


class SAC(OffPolicyAlgorithm):
    """Soft actor-critic over a squashed Gaussian policy."""

    kind = "sac"
    section = "sac"
    section_keys = SacConfig
    defaults = {**CONTINUOUS_DEFAULTS, "actor.hidden_sizes": [256, 256], "algo.lr": 3e-4}
    section_rules = (("n_critics", positive), ("ent_coef_init", positive))
    stat_names = ("policy_loss", "critic_loss", "ent_coef", "ent_coef_loss", "entropy")
    capabilities = continuous_control("sampled policy")

    @classmethod
    def acting_policy(cls, spaces: EnvSpaces, actor: ActorConfig) -> nn.Module:
        """The squashed Gaussian policy over ``spaces``."""
        return squashed_gaussian(spaces, actor)

    def build(self) -> list[tuple[str, nn.Module]]:
        """The squashed Gaussian policy, the critic ensemble (and its target) and the log
        temperature, a segment of its own only with ``algo.sac.learn_ent_coef``."""
        actor, spaces = self.settings.actor, self.spaces
        self.pi = SquashedGaussianPolicy(spaces.obs_shape, as_box(spaces.action_space), actor,
                                         spaces.obs_format)
        self.action_dim = self.pi.action_dim
        self.critic = EnsembleCritic(self.pi.obs_format.features, self.action_dim, actor,
                                     self.own.n_critics)
        self.targets["critic"] = TargetNetwork(self.critic)
        target_entropy = self.own.target_entropy
        self.target_entropy = float(-self.action_dim if target_entropy is None
                                    else target_entropy)
        parts: list[tuple[str, nn.Module]] = [("policy", self.pi), ("critic", self.critic)]
        self.log_alpha = Scalar(math.log(self.own.ent_coef_init))
        if self.own.learn_ent_coef:
            parts.append(("log_alpha", self.log_alpha))
        else:
            self.log_alpha.requires_grad_(False)
        return parts

    @property
    def policy(self) -> nn.Module:
        """The squashed Gaussian policy."""
        return self.pi

    def _noise(self, batch_size: int) -> torch.Tensor:
        return self.gaussian((batch_size, self.action_dim))

    def loss(self, batch: ReplayBatch) -> tuple[torch.Tensor, dict[str, float]]:
        """Critic TD loss to the soft target (min over the target critics minus the entropy term),
        the policy's ``alpha x log pi - min Q`` and, when learnt, the temperature's loss."""
        obs, next_obs = self.pi.features(batch.obs), self.pi.features(batch.next_obs)
        b = obs.shape[0]
        log_alpha = self.log_alpha.value
        alpha = log_alpha.detach().exp()
        actions_pi, log_prob = self.pi.sample(obs, self._noise(b))
        with torch.no_grad():
            next_actions, next_log_prob = self.pi.sample(next_obs, self._noise(b))
            next_q = self.targets["critic"].module(next_obs, next_actions).min(dim=0).values
            target = batch.rewards + batch.discounts * (next_q - alpha * next_log_prob)
        q = self.critic(obs, batch.actions)
        td = q - target
        if batch.weights is None:
            critic_loss = 0.5 * td.pow(2).mean(dim=1).sum()
        else:
            critic_loss = 0.5 * (batch.weights * td.pow(2)).mean(dim=1).sum()
            self.remember_td_errors(td[0])
        q_pi = self.critic(obs, actions_pi, frozen=True).min(dim=0).values
        policy_loss = (alpha * log_prob - q_pi).mean()
        loss = critic_loss + policy_loss
        names = ["policy_loss", "critic_loss", "ent_coef", "entropy"]
        values = [policy_loss, critic_loss, alpha, -log_prob.detach().mean()]
        if self.own.learn_ent_coef:
            alpha_loss = -(log_alpha * (log_prob.detach() + self.target_entropy)).mean()
            loss = loss + alpha_loss
            names.append("ent_coef_loss")
            values.append(alpha_loss)
        return loss, stat_floats(names, values)

    def stepping(self, step: int) -> list[str]:
        """Every segment: SAC steps them all each time."""
        return list(self.segments)

    def update_targets(self, step: int) -> None:
        """Move the critic target by ``replay.tau`` every
        ``replay.target_update_interval`` steps."""
        if step % self.replay.target_update_interval == 0:
            self.targets["critic"].update(self.segment_params("critic"), self.replay.tau)
