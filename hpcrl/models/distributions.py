"""Action distributions with sampling driven by noise drawn outside them.

Collectors draw the noise of each env from that env's own generator, so the actions an env
sees do not depend on which process steps it or how many envs share a forward pass. The
formulas match ``torch.distributions.Categorical`` and ``Normal`` (tests check this).
"""
from __future__ import annotations

import math
from typing import Protocol

import torch
import torch.nn.functional as F

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


class ActionDistribution(Protocol):
    """Operations on distribution parameters produced by the actor's policy head."""

    uniform_noise: bool  # the noise is uniform in [0, 1) (else standard normal)

    def noise_shape(self) -> tuple[int, ...]:
        """Shape of the per-sample noise :meth:`sample` consumes."""
        ...

    def sample(self, params: torch.Tensor, noise: torch.Tensor, /) -> torch.Tensor:
        """Actions ``[B, ...]`` drawn by ``noise`` (``[B, *noise_shape()]``) from ``params``."""
        ...

    def mode(self, params: torch.Tensor, /) -> torch.Tensor:
        """The most probable actions ``[B, ...]`` (what deterministic evaluation takes)."""
        ...

    def log_prob(self, params: torch.Tensor, actions: torch.Tensor, /) -> torch.Tensor:
        """Log-probabilities (or densities) ``[B]`` of ``actions``."""
        ...

    def entropy(self, params: torch.Tensor, /) -> torch.Tensor:
        """Entropies ``[B]`` of the distributions ``params`` give."""
        ...

    def log_prob_entropy(self, params: torch.Tensor, actions: torch.Tensor, /
                         ) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`log_prob` and :meth:`entropy` together (what a loss needs), sharing
        their intermediate results."""
        ...

    def kl(self, p: torch.Tensor, q: torch.Tensor, /) -> torch.Tensor:
        """``KL(P || Q)`` ``[B]`` between the distributions of the parameters ``p`` and
        ``q`` (a policy-loss add-on's distance to another policy)."""
        ...


# the logit of a move that an action mask says is illegal (actor.action_mask): probability 0
# after a softmax in float32, yet finite, so that 0 x log-probability terms stay 0
ILLEGAL_LOGIT = -1e9


class CategoricalActions:
    """Discrete actions from logits ``[B, K]``; inverse-CDF sampling from uniforms ``[B]``."""

    uniform_noise = True

    def __init__(self, num_actions: int) -> None:
        self.num_actions = num_actions

    def noise_shape(self) -> tuple[int, ...]:
        """``()``: one uniform per sample."""
        return ()

    def sample(self, logits: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """Inverse-CDF sample ``[B]``: the first action whose cumulative probability reaches the
        uniform ``noise`` ``[B]``."""
        cdf = torch.softmax(logits, dim=-1).cumsum(dim=-1)
        index = (cdf < noise.unsqueeze(-1)).sum(dim=-1)
        return index.clamp_(max=self.num_actions - 1)

    def mode(self, logits: torch.Tensor) -> torch.Tensor:
        """The most probable action ``[B]``."""
        return logits.argmax(dim=-1)

    def log_prob(self, logits: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """Log-probabilities ``[B]`` of ``actions``."""
        logp = F.log_softmax(logits, dim=-1)
        return logp.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)

    def entropy(self, logits: torch.Tensor) -> torch.Tensor:
        """Entropies ``[B]``."""
        logp = F.log_softmax(logits, dim=-1)
        return -(logp.exp() * logp).sum(dim=-1)

    def log_prob_entropy(self, logits: torch.Tensor, actions: torch.Tensor
                         ) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-probabilities and entropies ``[B]`` from one log-softmax."""
        logp = F.log_softmax(logits, dim=-1)  # once for both
        return (logp.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1),
                -(logp.exp() * logp).sum(dim=-1))

    def kl(self, p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        """``sum_a P(a) (log P(a) - log Q(a))`` ``[B]`` from the logits ``p`` and ``q``."""
        logp, logq = F.log_softmax(p, dim=-1), F.log_softmax(q, dim=-1)
        return (logp.exp() * (logp - logq)).sum(dim=-1)


class DiagGaussianActions:
    """Continuous actions from ``params = [mean, log_std]`` stacked on the last axis.

    ``params`` is ``[B, 2, A]``: ``params[:, 0]`` the mean, ``params[:, 1]`` the log std.
    Samples are ``mean + std * noise`` with standard-normal noise ``[B, A]``; they are not
    clipped here (the collector clips what it sends to the env, the log-prob stays exact).
    """

    uniform_noise = False

    def __init__(self, action_dim: int) -> None:
        self.action_dim = action_dim

    def noise_shape(self) -> tuple[int, ...]:
        """``(A,)``: one standard normal per action dimension."""
        return (self.action_dim,)

    def sample(self, params: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """``mean + std x noise`` ``[B, A]``, unclipped."""
        return params[:, 0] + params[:, 1].exp() * noise

    def mode(self, params: torch.Tensor) -> torch.Tensor:
        """The mean ``[B, A]``."""
        return params[:, 0]

    def log_prob(self, params: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """Log-densities ``[B]`` of ``actions``, summed over the action dimensions."""
        mean, log_std = params[:, 0], params[:, 1]
        z = (actions - mean) * torch.exp(-log_std)
        return (-0.5 * z * z - log_std - _LOG_SQRT_2PI).sum(dim=-1)

    def entropy(self, params: torch.Tensor) -> torch.Tensor:
        """Entropies ``[B]``, summed over the action dimensions."""
        return (params[:, 1] + 0.5 + _LOG_SQRT_2PI).sum(dim=-1)

    def log_prob_entropy(self, params: torch.Tensor, actions: torch.Tensor
                         ) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`log_prob` and :meth:`entropy` (they share nothing worth reusing)."""
        return self.log_prob(params, actions), self.entropy(params)

    def kl(self, p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        """The Gaussians' KL ``[B]``, summed over the action dimensions: ``log s_q - log s_p
        + (s_p^2 + (m_p - m_q)^2) / (2 s_q^2) - 1/2`` each."""
        (mean_p, log_std_p), (mean_q, log_std_q) = p.unbind(1), q.unbind(1)
        ratio = torch.exp(2 * (log_std_p - log_std_q))  # s_p^2 / s_q^2
        gap = (mean_p - mean_q) * torch.exp(-log_std_q)
        return (log_std_q - log_std_p + 0.5 * (ratio + gap * gap) - 0.5).sum(dim=-1)


class MultiCategoricalActions:
    """Independent discrete components (MultiDiscrete, or MultiBinary as 2 choices a bit):
    logits ``[B, sum(categories)]``, one segment per component; actions ``[B, k]``; one
    uniform ``[B, k]`` per component drives its inverse-CDF sample; log-probs and entropies
    are sums over the components."""

    uniform_noise = True

    def __init__(self, categories: tuple[int, ...]) -> None:
        self.categories = tuple(categories)
        self.parts = [CategoricalActions(n) for n in self.categories]

    def noise_shape(self) -> tuple[int, ...]:
        """``(k,)``: one uniform per component."""
        return (len(self.categories),)

    def _split(self, params: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return torch.split(params, list(self.categories), dim=-1)

    def sample(self, params: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """Each component's inverse-CDF sample from its uniform, stacked ``[B, k]``."""
        return torch.stack([part.sample(logits, noise[:, j]) for j, (part, logits) in
                            enumerate(zip(self.parts, self._split(params), strict=True))], dim=-1)

    def mode(self, params: torch.Tensor) -> torch.Tensor:
        """Each component's most probable choice ``[B, k]``."""
        return torch.stack([logits.argmax(dim=-1) for logits in self._split(params)], dim=-1)

    def log_prob(self, params: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """The sum of the components' log-probabilities ``[B]``."""
        return sum(part.log_prob(logits, actions[..., j]) for j, (part, logits) in
                   enumerate(zip(self.parts, self._split(params), strict=True)))  # type: ignore[return-value]

    def entropy(self, params: torch.Tensor) -> torch.Tensor:
        """The sum of the components' entropies ``[B]``."""
        return sum(part.entropy(logits) for part, logits in
                   zip(self.parts, self._split(params), strict=True))  # type: ignore[return-value]

    def log_prob_entropy(self, params: torch.Tensor, actions: torch.Tensor
                         ) -> tuple[torch.Tensor, torch.Tensor]:
        """Summed log-probabilities and entropies ``[B]``, one log-softmax per component."""
        pairs = [part.log_prob_entropy(logits, actions[..., j]) for j, (part, logits) in
                 enumerate(zip(self.parts, self._split(params), strict=True))]
        return sum(p[0] for p in pairs), sum(p[1] for p in pairs)  # type: ignore[return-value]

    def kl(self, p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        """The sum of the components' KLs ``[B]``."""
        return sum(part.kl(a, b) for part, a, b in zip(self.parts, self._split(p),
                                                      self._split(q), strict=True))  # type: ignore[return-value]


def make_distribution(categories: tuple[int, ...] | None, discrete: bool,
                      action_dim: int) -> ActionDistribution:
    """The distribution of an action space: Categorical for one Discrete, independent
    categoricals for MultiDiscrete and MultiBinary, a diagonal Gaussian for Box."""
    if categories is None:
        return DiagGaussianActions(action_dim)
    if discrete:
        return CategoricalActions(categories[0])
    return MultiCategoricalActions(categories)
