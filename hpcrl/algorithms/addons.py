"""Policy-loss add-ons of the on-policy algorithms (``algo.addons``): terms that
:meth:`~hpcrl.algorithms.on_policy.OnPolicyAlgorithm.compute_gradients` adds to any
on-policy loss, PPO's, A2C's, IMPALA's or a plug-in's.

- **KL attraction / repulsion** to other, frozen policies: per sample of the minibatch,
  ``KL(other || policy)`` of the action distributions at its observation. Attracting adds
  ``coef x mean KL`` (stay near the other policy: continual learning, distillation);
  repelling adds ``coef x mean max(0, max_kl - KL)``, a hinge that pushes every state's
  KL up to ``max_kl`` and no further (diversity, novelty): an unbounded repulsion would
  drive a Gaussian's std to zero or a categorical's logits apart for ever.
- **Reward and return predictors**: the actor's predictor head (one column each, on the
  policy trunk's features) learns each sample's reward and return by mean squared error,
  an auxiliary loss that shapes the features the policy acts from.

The loss reads what the algorithm's own evaluation of the minibatch produced
(:class:`PolicyOutputs`: the distribution parameters and predictions carry their graph), so
the terms cost no second forward pass; an algorithm whose loss evaluates the actor some
other way gets one (:meth:`~hpcrl.algorithms.on_policy.OnPolicyAlgorithm.addon_outputs`).
Each term is reported as a loss stat, so it becomes a ``progress.csv`` column.

The other policies are loaded above ``core`` (:mod:`hpcrl.trained.reference_policies`) and handed
over with :meth:`PolicyLossAddons.attach`; their fingerprints travel in the algorithm's
checkpoint state, so a resume refuses a policy file that changed since the run started.
"""
from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from hpcrl.errors import ConfigError
from hpcrl.models.actor import ActorCritic
from hpcrl.models.distributions import ActionDistribution
from hpcrl.numerics.compiling import stat_floats
from hpcrl.sections.policy_addons import PolicyAddonsConfig


class PolicyOutputs(NamedTuple):
    """One minibatch as the add-ons read it, one row per sample: the observations as the
    rollout holds them, the policy's distribution parameters and predictor outputs (with
    their graph), and the predictors' targets, the rewards and returns (None where no
    predictor needs them)."""

    obs: torch.Tensor
    params: torch.Tensor
    predictions: torch.Tensor | None
    rewards: torch.Tensor | None
    returns: torch.Tensor | None


@dataclass(frozen=True)
class KlTerm:
    """One entry of ``algo.addons.kl_policies``: its column's name, whether it repels, its
    weight and (repelling) the KL where it stops pushing."""

    name: str
    repel: bool
    coef: float
    max_kl: float

    @classmethod
    def of(cls, entry: dict[str, Any]) -> KlTerm:
        """The term of a (validated, completed) config entry."""
        return cls(str(entry["name"]), entry["mode"] == "repel", float(entry["coef"]),
                   float(entry.get("max_kl", 0.0)))


def predictor_stats(name: str) -> tuple[str, str, str]:
    """The columns of predictor ``name``: its loss, its mean prediction, its mean target."""
    return f"{name}_predictor_loss", f"{name}_prediction", f"{name}_target"


def addon_stat_names(section: PolicyAddonsConfig | None) -> tuple[str, ...]:
    """The loss stats the add-ons of ``section`` report (``()`` for none): ``kl_<name>``
    per KL term, then each predictor's :func:`predictor_stats`."""
    if section is None:
        return ()
    kl = tuple(f"kl_{entry['name']}" for entry in section.kl_policies)
    return kl + tuple(s for name in section.predictors for s in predictor_stats(name))


def fingerprint(module: nn.Module) -> str:
    """A digest of ``module``'s weights and buffers (what a resume compares)."""
    digest = hashlib.sha256()
    for key, value in module.state_dict().items():
        digest.update(key.encode())
        digest.update(value.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


class PolicyLossAddons:
    """The add-on terms of ``section`` over actions of ``distribution``."""

    def __init__(self, section: PolicyAddonsConfig, distribution: ActionDistribution) -> None:
        self.terms = [KlTerm.of(entry) for entry in section.kl_policies]
        self.predictors = section.predictors
        self.weights = {"reward": section.reward_predictor_coef,
                        "return": section.return_predictor_coef}
        self.distribution = distribution
        self.stat_names = addon_stat_names(section)
        self.references: list[ActorCritic] | None = None
        self.fingerprints: list[str] = []

    @property
    def needs_references(self) -> bool:
        """It has KL terms, whose policies must be :meth:`attach`-ed before any loss."""
        return bool(self.terms)

    def attach(self, references: Sequence[ActorCritic]) -> None:
        """The other policies of the KL terms, in the order of ``kl_policies``: frozen here
        (no gradient, eval mode) and fingerprinted."""
        if len(references) != len(self.terms):
            raise ValueError(f"{len(self.terms)} KL terms need as many policies, got "
                             f"{len(references)}")
        for module in references:
            module.requires_grad_(False)
            module.eval()
        self.references = list(references)
        self.fingerprints = [fingerprint(m) for m in references]

    def check_fingerprints(self, saved: Sequence[str]) -> None:
        """Refuse to resume with other policies than the run started with: a policy file
        that changed since (a run directory that trained on, say) would make the resumed
        run differ from the uninterrupted one."""
        if not self.fingerprints or list(saved) == self.fingerprints:
            return
        changed = [t.name for t, a, b in zip(self.terms, saved, self.fingerprints, strict=False)
                   if a != b] or [t.name for t in self.terms]
        raise ConfigError(f"config key 'algo.addons.kl_policies': the policy of term "
                          f"kl_{changed[0]} is not the one this run started with (its "
                          f"weights changed since); restore that file, or start a new run "
                          f"(a checkpoint file that stays put, such as checkpoints/steps-N.pt "
                          f"of a run with train.keep_checkpoints > 1, keeps runs resumable)")

    def loss(self, outputs: PolicyOutputs) -> tuple[torch.Tensor, dict[str, float]]:
        """The add-ons' summed loss on one minibatch and their stats (by name)."""
        total = outputs.params.new_zeros(())
        stats: list[torch.Tensor] = []
        if self.terms:
            if self.references is None:
                raise RuntimeError("the KL add-ons' policies were not attached "
                                   "(hpcrl.trained.reference_policies.attach_references)")
            for term, other in zip(self.terms, self.references, strict=True):
                with torch.no_grad():
                    target = other.policy_params(other.normalize(outputs.obs))
                kl = self.distribution.kl(target, outputs.params)
                if term.repel:
                    total = total + term.coef * F.relu(term.max_kl - kl).mean()
                else:
                    total = total + term.coef * kl.mean()
                stats.append(kl.detach().mean())
        for column, name in enumerate(self.predictors):
            assert outputs.predictions is not None  # the actor has the head of each
            targets = outputs.rewards if name == "reward" else outputs.returns
            assert targets is not None  # the storage keeps what each predictor learns
            predicted = outputs.predictions[:, column]
            error = F.mse_loss(predicted, targets)
            total = total + self.weights[name] * error
            stats += [error.detach(), predicted.detach().mean(), targets.mean()]
        return total, stat_floats(self.stat_names, stats)
