"""TD3 (Fujimoto et al. 2018) and DDPG (Lillicrap et al. 2016) over a deterministic policy.

- critic: ``sum_k mean((Q_k(s, a) - y)^2)`` with ``y = r + discount * min_k
  Q_target_k(s', clip(mu_target(s') + clip(eps, -c, c), -1, 1))``, ``eps ~ N(0, sigma^2)``
  (target policy smoothing);
- policy, every ``algo.td3.policy_delay`` applied steps: ``-mean(Q_1(s, mu(s)))`` with the
  critic's weights detached; the target policy and critics move by ``replay.tau`` on those
  steps only. On the other steps the policy segment gets neither a gradient nor an
  optimiser step.

DDPG is the case of one critic, no delay and no target smoothing. As in SAC, both losses are
taken at the same weights (Stable-Baselines3 steps the critic first); on Pendulum-v1 the
returns match SB3's (benchmarks/offpolicy_vs_sb3.py).
"""
from __future__ import annotations

from typing import ClassVar

import torch
from torch import nn

from hpcrl.algorithms.key_rules import Rule, not_negative, positive
from hpcrl.algorithms.off_policy import (
    CONTINUOUS_DEFAULTS,
    OffPolicyAlgorithm,
    continuous_control,
)
from hpcrl.algorithms.td3 import DdpgConfig, Td3Config
from hpcrl.buffers.replay.buffer import ReplayBatch
from hpcrl.envs.vector import EnvSpaces, as_box
from hpcrl.models.continuous_policies import DeterministicPolicy
from hpcrl.models.critics import EnsembleCritic
from hpcrl.models.target import TargetNetwork
from hpcrl.numerics.compiling import stat_floats
from hpcrl.sections.schema import ActorConfig

# the exploration noise's keys, which DDPG's section and TD3's share
NOISE_RULES: tuple[Rule, ...] = (("noise_std", not_negative), ("ou_theta", not_negative),
                                 ("ou_dt", positive))
# SB3's TD3 and DDPG: lr 1e-3, net [400, 300]
TD3_DEFAULTS = {**CONTINUOUS_DEFAULTS, "actor.hidden_sizes": [400, 300], "algo.lr": 1e-3}


class TD3(OffPolicyAlgorithm):
    """Twin delayed deep deterministic policy gradient."""

    kind = "td3"
    section = "td3"
    section_keys: ClassVar[type | None] = Td3Config
    defaults = TD3_DEFAULTS
    section_rules = (*NOISE_RULES, ("policy_delay", positive),
                     ("target_policy_noise", not_negative), ("target_noise_clip", not_negative),
                     ("n_critics", positive))
    stat_names = ("policy_loss", "critic_loss", "q_mean")
    capabilities = continuous_control("action noise")

    @property
    def num_critics(self) -> int:
        """The critics in the ensemble (``algo.td3.n_critics``)."""
        return self.own.n_critics

    @property
    def policy_delay(self) -> int:
        """Critic steps per policy step (``algo.td3.policy_delay``)."""
        return self.own.policy_delay

    @property
    def smoothing(self) -> tuple[float, float]:
        """Std and clip of the target policy noise."""
        return self.own.target_policy_noise, self.own.target_noise_clip

    @classmethod
    def acting_policy(cls, spaces: EnvSpaces, actor: ActorConfig) -> nn.Module:
        """The deterministic policy over ``spaces``."""
        return DeterministicPolicy(spaces.obs_shape, as_box(spaces.action_space), actor,
                                   spaces.obs_format)

    def build(self) -> list[tuple[str, nn.Module]]:
        """The deterministic policy and the critic ensemble (segments ``policy``, ``critic``) and
        their targets."""
        spaces = self.spaces
        self.mu = DeterministicPolicy(spaces.obs_shape, as_box(spaces.action_space),
                                      self.settings.actor, spaces.obs_format)
        self.action_dim = self.mu.action_dim
        self.critic = EnsembleCritic(self.mu.obs_format.features, self.action_dim,
                                     self.settings.actor, self.num_critics)
        self.target_mu = TargetNetwork(self.mu)  # typed: its module is the policy's class
        self.targets["policy"] = self.target_mu
        self.targets["critic"] = TargetNetwork(self.critic)
        return [("policy", self.mu), ("critic", self.critic)]

    @property
    def policy(self) -> nn.Module:
        """The deterministic policy."""
        return self.mu

    def policy_step(self, step: int) -> bool:
        """Whether applied step ``step`` also steps the policy (every :attr:`policy_delay`-th)."""
        return step % self.policy_delay == 0

    def loss(self, batch: ReplayBatch) -> tuple[torch.Tensor, dict[str, float]]:
        """Critic TD loss to the min of the target critics at the smoothed target action; on a
        policy step, plus ``-Q_1(s, mu(s))`` with the critics' weights frozen."""
        obs, next_obs = self.mu.features(batch.obs), self.mu.features(batch.next_obs)
        std, clip = self.smoothing
        with torch.no_grad():
            next_actions = self.target_mu.module.squashed_mode(next_obs)
            if std > 0:
                noise = self.gaussian(tuple(next_actions.shape))
                next_actions = (next_actions + (noise * std).clamp_(-clip, clip)).clamp_(-1, 1)
            next_q = self.targets["critic"].module(next_obs, next_actions).min(dim=0).values
            target = batch.rewards + batch.discounts * next_q
        q = self.critic(obs, batch.actions)
        td = q - target
        if batch.weights is None:
            critic_loss = td.pow(2).mean(dim=1).sum()
        else:
            critic_loss = (batch.weights * td.pow(2)).mean(dim=1).sum()
            self.remember_td_errors(td[0])
        names, values = ["critic_loss", "q_mean"], [critic_loss, q[0].detach().mean()]
        loss = critic_loss
        if self.policy_step(self.steps + 1):
            q_pi = self.critic(obs, self.mu.squashed_mode(obs), frozen=True, members=1)
            policy_loss = -q_pi.mean()
            loss = loss + policy_loss
            names.append("policy_loss")
            values.append(policy_loss)
        return loss, stat_floats(names, values)

    def stepping(self, step: int) -> list[str]:
        """``critic``, and ``policy`` on a policy step."""
        return ["critic", "policy"] if self.policy_step(step) else ["critic"]

    def update_targets(self, step: int) -> None:
        """Move both targets by ``replay.tau`` on policy steps only."""
        if self.policy_step(step):
            tau = self.replay.tau
            self.targets["critic"].update(self.segment_params("critic"), tau)
            self.targets["policy"].update(self.segment_params("policy"), tau)


class DDPG(TD3):
    """Deep deterministic policy gradient: TD3 with one critic, no delay, no smoothing."""

    kind = "ddpg"
    section = "ddpg"
    section_keys = DdpgConfig
    defaults = TD3_DEFAULTS
    section_rules = NOISE_RULES

    @property
    def num_critics(self) -> int:
        """1: DDPG has a single critic."""
        return 1

    @property
    def policy_delay(self) -> int:
        """1: the policy steps with the critic every time."""
        return 1

    @property
    def smoothing(self) -> tuple[float, float]:
        """No target policy noise: ``(0, 0)``."""
        return 0.0, 0.0
