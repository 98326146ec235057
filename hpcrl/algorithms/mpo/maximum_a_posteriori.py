"""MPO (Abdolmaleki et al. 2018): maximum a posteriori policy optimisation, continuous actions.

Each gradient step, for every next state ``s`` of the batch, ``N`` actions ``a_j = tanh(u_j)``
are drawn from the *target* policy (``algo.mpo.action_samples``) and valued once by the
target critics; those values serve both the critics' TD targets and the policy's two steps
(as Acme's MPO does: the next states are replay states like the others, and valuing one draw
instead of one at the states and one at the next states halves the learner's largest cost):

- **E-step** (a non-parametric improved policy): weights ``w_j = softmax_j(Q(s, a_j) /
  eta)``; the temperature ``eta`` minimises the dual ``eta * epsilon + eta * mean_s log
  mean_j exp(Q(s, a_j) / eta)``, which keeps the improved policy within KL ``epsilon``
  (``algo.mpo.epsilon``) of the target policy;
- **M-step** (fit the policy to it): maximise ``sum_j w_j log pi(u_j | s)`` under trust
  regions on the mean and the covariance *decoupled*, each with its own KL bound
  (``algo.mpo.epsilon_mean``, ``algo.mpo.epsilon_std``, per action dimension) and
  Lagrange multiplier: the mean is fitted with the target's std, the std with the target's
  mean, and ``alpha * KL`` penalises each (the multipliers ascend ``alpha * (epsilon -
  KL)``).

KL divergence does not change under the tanh bijection, so the trust regions and the
log-likelihoods are taken on the Gaussian over ``u``. The critics learn TD targets
``r + discount * mean_j min_k Q_target_k(s', a_j)`` over the same samples.
Policy, critics and the dual variables (``eta``, ``alpha_mean``, ``alpha_std``, each
positive through a softplus) are segments of their own; the duals step with
``algo.mpo.dual_lr``. Target policy and critics move by ``replay.tau`` every
``replay.target_update_interval`` steps.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from hpcrl.algorithms.key_rules import positive
from hpcrl.algorithms.mpo import MpoConfig
from hpcrl.algorithms.off_policy import (
    CONTINUOUS_DEFAULTS,
    OffPolicyAlgorithm,
    continuous_control,
    squashed_gaussian,
)
from hpcrl.buffers.replay.buffer import ReplayBatch
from hpcrl.envs.vector import EnvSpaces, as_box
from hpcrl.models.continuous_policies import SquashedGaussianPolicy
from hpcrl.models.critics import EnsembleCritic
from hpcrl.models.target import TargetNetwork
from hpcrl.numerics.compiling import stat_floats
from hpcrl.sections.schema import ActorConfig

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def _inverse_softplus(x: float) -> float:
    return math.log(math.expm1(x))


class MpoDuals(nn.Module):
    """MPO's dual variables, kept positive by a softplus: the temperature and one
    multiplier per action dimension for the mean's and the std's trust regions."""

    def __init__(self, action_dim: int, temperature: float, alpha_mean: float,
                 alpha_std: float) -> None:
        super().__init__()
        self.raw_temperature = nn.Parameter(torch.tensor([_inverse_softplus(temperature)]))
        self.raw_alpha_mean = nn.Parameter(torch.full((action_dim,),
                                                      _inverse_softplus(alpha_mean)))
        self.raw_alpha_std = nn.Parameter(torch.full((action_dim,),
                                                     _inverse_softplus(alpha_std)))

    def values(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The positive temperature ``[1]`` and mean and std multipliers ``[A]`` each."""
        return (F.softplus(self.raw_temperature) + 1e-8, F.softplus(self.raw_alpha_mean) + 1e-8,
                F.softplus(self.raw_alpha_std) + 1e-8)


def gaussian_log_prob(u: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """``log N(u; mean, std)`` summed over the last (action) dimension."""
    z = (u - mean) / std
    return (-0.5 * z * z - std.log() - _LOG_SQRT_2PI).sum(dim=-1)


def temperature_loss(q: torch.Tensor, temperature: torch.Tensor, epsilon: float
                     ) -> tuple[torch.Tensor, torch.Tensor]:
    """The E-step: the temperature's dual loss and the (detached) weights of the ``[N, B]``
    action values ``q`` (a softmax over the ``N`` samples of each state)."""
    tempered = q.detach() / temperature
    n = q.shape[0]
    dual = temperature * (epsilon + (torch.logsumexp(tempered, dim=0) - math.log(n)).mean())
    return dual, torch.softmax(tempered, dim=0).detach()


def decoupled_kl(mean_t: torch.Tensor, std_t: torch.Tensor, mean: torch.Tensor,
                 std: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per action dimension, averaged over states: ``KL(target || N(mean, std_t))`` (the
    mean's move) and ``KL(target || N(mean_t, std))`` (the std's)."""
    kl_mean = 0.5 * ((mean - mean_t) / std_t).pow(2)
    kl_std = std.log() - std_t.log() + std_t.pow(2) / (2 * std.pow(2)) - 0.5
    return kl_mean.mean(dim=0), kl_std.mean(dim=0)


class MPO(OffPolicyAlgorithm):
    """MPO over a squashed Gaussian policy, with twin critics and target networks."""

    kind = "mpo"
    section = "mpo"
    section_keys = MpoConfig
    # SAC's network and rhythm (Acme's MPO also takes lr 3e-4 with 256-wide nets)
    defaults = {**CONTINUOUS_DEFAULTS, "actor.hidden_sizes": [256, 256], "algo.lr": 3e-4}
    section_rules = tuple((key, positive) for key in (
        "epsilon", "epsilon_mean", "epsilon_std", "action_samples", "dual_lr",
        "init_temperature", "init_alpha", "n_critics"))
    stat_names = ("policy_loss", "critic_loss", "temperature", "kl_mean", "kl_std",
                  "alpha_mean", "alpha_std")
    capabilities = continuous_control("sampled policy")

    @classmethod
    def acting_policy(cls, spaces: EnvSpaces, actor: ActorConfig) -> nn.Module:
        """The squashed Gaussian policy over ``spaces``."""
        return squashed_gaussian(spaces, actor)

    def build(self) -> list[tuple[str, nn.Module]]:
        """The squashed Gaussian policy, the critic ensemble and the duals (segments ``policy``,
        ``critic``, ``duals``), and target copies of the policy and critics."""
        actor, spaces, r = self.settings.actor, self.spaces, self.own
        self.pi = SquashedGaussianPolicy(spaces.obs_shape, as_box(spaces.action_space), actor,
                                         spaces.obs_format)
        self.action_dim = self.pi.action_dim
        self.critic = EnsembleCritic(self.pi.obs_format.features, self.action_dim, actor,
                                     r.n_critics)
        self.target_critic = TargetNetwork(self.critic)  # typed: an EnsembleCritic's
        self.targets["critic"] = self.target_critic
        self.target_pi = TargetNetwork(self.pi)  # typed: its module is the policy's class
        self.targets["policy"] = self.target_pi
        self.duals = MpoDuals(self.action_dim, r.init_temperature, r.init_alpha,
                              r.init_alpha)
        return [("policy", self.pi), ("critic", self.critic), ("duals", self.duals)]

    @property
    def policy(self) -> nn.Module:
        """The squashed Gaussian policy."""
        return self.pi

    def segment_learning_rate(self, name: str, lr: float) -> float:
        """``algo.mpo.dual_lr`` for the duals, ``lr`` for the networks."""
        return self.own.dual_lr if name == "duals" else lr

    def _target_samples(self, obs: torch.Tensor, n: int
                        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``n`` pre-squash samples ``u [n, B, A]`` of the target policy at ``obs``, their
        actions ``tanh(u)``, and the target's mean and std ``[B, A]``."""
        with torch.no_grad():
            mean, log_std = self.target_pi.module.mean_log_std(obs)
            std = log_std.exp()
            u = mean + std * self.gaussian((n,) + tuple(mean.shape))
        return u, torch.tanh(u), mean, std

    def _target_q(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """``min_k Q_target_k`` of ``actions [n, B, A]`` at ``obs [B, D]``: ``[n, B]``."""
        return self.target_critic.module.sampled(obs, actions).min(dim=0).values

    def loss(self, batch: ReplayBatch) -> tuple[torch.Tensor, dict[str, float]]:
        """Critic TD loss to the target policy's expected next value, the E-step's temperature
        dual, the M-step's decoupled mean and std fits under their KL trust regions, and the
        multipliers' duals, summed. One draw of target-policy actions at the next states,
        valued once by the target critics, serves the TD targets and both steps."""
        r = self.own
        n = r.action_samples
        obs, next_obs = self.pi.features(batch.obs), self.pi.features(batch.next_obs)
        u, actions, mean_t, std_t = self._target_samples(next_obs, n)
        with torch.no_grad():
            q = self._target_q(next_obs, actions)
            target = batch.rewards + batch.discounts * q.mean(dim=0)
        # critics: TD targets with the target policy's expected next value
        td = self.critic(obs, batch.actions) - target
        if batch.weights is None:
            critic_loss = 0.5 * td.pow(2).mean(dim=1).sum()
        else:
            critic_loss = 0.5 * (batch.weights * td.pow(2)).mean(dim=1).sum()
            self.remember_td_errors(td[0])
        # E-step at the next states: weights of the target policy's samples, and the
        # temperature's dual
        temperature, alpha_mean, alpha_std = self.duals.values()
        temperature_dual, weights = temperature_loss(q, temperature, r.epsilon)
        # M-step: the decoupled fits, each under its own trust region
        mean, log_std = self.pi.mean_log_std(next_obs)
        std = log_std.exp()
        fit_mean = (weights * gaussian_log_prob(u, mean, std_t)).sum(dim=0).mean()
        fit_std = (weights * gaussian_log_prob(u, mean_t, std)).sum(dim=0).mean()
        kl_mean, kl_std = decoupled_kl(mean_t, std_t, mean, std)
        policy_loss = (-(fit_mean + fit_std) + (alpha_mean.detach() * kl_mean).sum()
                       + (alpha_std.detach() * kl_std).sum())
        alpha_dual = ((alpha_mean * (r.epsilon_mean - kl_mean.detach())).sum()
                      + (alpha_std * (r.epsilon_std - kl_std.detach())).sum())
        loss = critic_loss + policy_loss + temperature_dual + alpha_dual
        return loss, stat_floats(self.stat_names, [
            policy_loss, critic_loss, temperature[0], kl_mean.detach().mean(),
            kl_std.detach().mean(), alpha_mean.detach().mean(), alpha_std.detach().mean()])

    def stepping(self, step: int) -> list[str]:
        """Every segment: MPO steps them all each time."""
        return list(self.segments)

    def update_targets(self, step: int) -> None:
        """Move the critic and policy targets by ``replay.tau`` every
        ``replay.target_update_interval`` steps."""
        if step % self.replay.target_update_interval == 0:
            self.targets["critic"].update(self.segment_params("critic"), self.replay.tau)
            self.targets["policy"].update(self.segment_params("policy"), self.replay.tau)
