"""The config section of the policy-loss add-ons of the on-policy algorithms, ``algo.addons.*``.

Terms added to the loss of PPO, A2C or IMPALA (and their plug-in subclasses), as the seed
library PyTorchRL offered them:

- **KL attraction and repulsion** (``kl_policies``): a term per other policy, a trained
  run's actor named by its run directory or checkpoint file, on the observations of each
  minibatch. Attraction keeps the new policy near an earlier one (continual learning,
  distillation from a teacher); repulsion pushes it away (diverse or novel behaviour).
- **Reward and return predictors** (``reward_predictor_coef``, ``return_predictor_coef``):
  auxiliary heads on the policy's features that predict each step's reward and its return,
  an auxiliary loss that shapes the representation the policy acts from.

Each entry of ``kl_policies`` is a mapping with the keys of :data:`KL_POLICY_KEYS`; the
checks are :func:`hpcrl.config.validate_addons.check_policy_addons`, and the other policies
are loaded and checked against the env's spaces where training starts
(:mod:`hpcrl.trained.reference_policies`).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hpcrl.field_docs import doc

# the keys of an entry of algo.addons.kl_policies (policy and mode are required)
KL_POLICY_KEYS = ("policy", "mode", "coef", "name", "max_kl")
KL_MODES = ("attract", "repel")
DEFAULT_COEF = 1.0
DEFAULT_MAX_KL = 1.0  # nats: where a repelled state stops being pushed


def completed_entry(entry: Any, index: int) -> Any:
    """An entry of ``kl_policies`` with the values it left out: ``coef``, ``name``
    (``<mode>_<index>``) and, repelling, ``max_kl``. Anything but a mapping comes back as
    it is, for the checks to refuse."""
    if not isinstance(entry, Mapping):
        return entry
    out = dict(entry)
    out.setdefault("coef", DEFAULT_COEF)
    out.setdefault("name", f"{out.get('mode')}_{index}")
    if out.get("mode") == "repel":
        out.setdefault("max_kl", DEFAULT_MAX_KL)
    return out


@dataclass
class PolicyAddonsConfig:
    """Terms added to an on-policy algorithm's loss (all off by default)."""

    kl_policies: list = doc(
        "KL attraction to, or repulsion from, other trained policies: a list of mappings "
        "{policy: PATH, mode: attract | repel, coef: C, name: N, max_kl: M}. policy: a run "
        "directory (its checkpoints/last.pt as it is when training starts) or a checkpoint "
        "file, of a ppo, a2c or impala run on the same observation and action spaces, "
        "loaded once, frozen, on the learner's device. mode 'attract' adds C x mean "
        "KL(other || policy) over each minibatch's observations (keep near it: continual "
        "learning, distillation); 'repel' adds C x mean max(0, M - KL(other || policy)), "
        "pushing each state's KL up to max_kl M nats (default 1.0; diversity, novelty). "
        "coef C > 0 (default 1.0). Each term's mean KL is the progress.csv column kl_N; "
        "name N defaults to <mode>_<index in the list> (kl_attract_0).", factory=list)
    reward_predictor_coef: float = doc(
        "Weight of a reward predictor's loss (0: no predictor): a head on the policy's "
        "features (the last hidden layer of its trunk) predicts the reward of each step "
        "from its observation (the reward the rollout stores: scaled under "
        "env.normalize_reward), trained by mean squared error. Columns "
        "reward_predictor_loss, reward_prediction and reward_target (minibatch means).", 0.0)
    return_predictor_coef: float = doc(
        "Weight of a return predictor's loss (0: no predictor): a head on the policy's "
        "features predicts the return of each step, the target its value head learns "
        "toward (GAE's lambda-return, V-trace's target for impala), by mean squared error. "
        "Columns return_predictor_loss, return_prediction and return_target.", 0.0)

    def __post_init__(self) -> None:
        # entries complete from here on (config.yaml records every value a run used)
        if isinstance(self.kl_policies, list):
            self.kl_policies = [completed_entry(e, i) for i, e in enumerate(self.kl_policies)]

    @property
    def predictors(self) -> tuple[str, ...]:
        """The predictor heads the actor gets, in their fixed order: ``reward``, ``return``
        (those with a weight)."""
        return tuple(name for name, coef in (("reward", self.reward_predictor_coef),
                                             ("return", self.return_predictor_coef))
                     if coef != 0)

    @property
    def enabled(self) -> bool:
        """Any add-on is on."""
        return bool(self.kl_policies) or bool(self.predictors)
