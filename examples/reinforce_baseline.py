"""An on-policy algorithm of your own with keys of its own: REINFORCE with a baseline.

    PYTHONPATH=examples hpcrl train --set algo.name=reinforce_baseline:ReinforceBaseline \\
        --set algo.reinforce.baseline=value
    PYTHONPATH=examples mpiexec -n 2 hpcrl train --set scheme.preset=ddppo \\
        --set algo.name=reinforce_baseline:ReinforceBaseline

REINFORCE (Williams 1992) follows the gradient ``E[grad log pi(a|s) (G - b(s))]`` of the
return ``G`` of each step, minus a baseline ``b`` that lowers the variance without biasing
the gradient (Sutton and Barto, sec. 13.4). ``algo.reinforce.baseline`` picks it: ``value``,
a learned state value fitted to the returns (its loss weighted by ``algo.vf_coef``);
``mean``, the mean return of the whole job's batch; or ``none``. ``algo.reinforce.
clip_weights`` may clip each step's weight ``G - b``. The returns are the collectors'
lambda-returns, Monte-Carlo ones at ``algo.gae_lambda=1``: A2C's default. The class derives
from ``hpcrl.A2C`` for its one step on each whole rollout, and so runs as a2c, with its
defaults and schemes; only the loss and the keys are its own.

One module and its registration are all an algorithm with keys of its own needs:
``section`` names its config section (``algo.reinforce``), ``section_keys`` is the dataclass
of its keys (their defaults are the field defaults; ``hpcrl`` refuses an unknown key or a
wrong type, and ``section_problem`` states the range rules, before the run starts), and
hpcrl builds it, like every algorithm, as ``Class(spaces, settings, device, reducer)``: the
shared ``algo.*`` keys are ``self.algo``, its own section ``self.own``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

import hpcrl
from hpcrl.algorithms.on_policy import entropy_bonus, value_error
from hpcrl.buffers.rollout_storage import GaeBatch
from hpcrl.numerics.compiling import stat_floats
from hpcrl.numerics.reducer import global_mean_std


@dataclass
class ReinforceConfig:
    """REINFORCE's own keys (``algo.reinforce.*``)."""

    baseline: Literal["value", "mean", "none"] = "value"
    """What is subtracted from each return: a learned state value, the batch's mean return,
    or nothing."""
    clip_weights: float | None = None
    """Clip each step's weight ``G - b`` (after normalisation, with
    algo.normalize_advantage) to [-clip_weights, clip_weights]; null: no clip."""


class ReinforceBaseline(hpcrl.A2C):
    """REINFORCE with a baseline: A2C's one step on each whole rollout, its own loss."""

    stat_names = ("policy_loss", "baseline_loss", "entropy")
    section = "reinforce"
    section_keys = ReinforceConfig

    @classmethod
    def section_problem(cls, own: ReinforceConfig) -> str | None:
        """A clip of the weights must be positive."""
        if own.clip_weights is not None and not own.clip_weights > 0:
            return (f"config key 'algo.reinforce.clip_weights' must be > 0 (or null: no "
                    f"clip), got {own.clip_weights}")
        return None

    def loss(self, batch: GaeBatch) -> tuple[torch.Tensor, dict[str, float]]:
        """``-mean(log pi(a|s) x (G - b))`` (normalised over the job's batch with
        ``algo.normalize_advantage``, clipped with ``algo.reinforce.clip_weights``), plus
        ``algo.vf_coef`` x the learned baseline's squared error to the returns (for
        ``baseline=value``), minus ``algo.ent_coef`` x the mean entropy."""
        log_probs, entropy, values, batch = self.evaluate(batch)
        returns = batch.returns if batch.returns.dim() == 1 else batch.returns[:, 0]  # RND's
        if self.own.baseline == "value":
            weights = batch.advantages  # G - b(s), b the value the collectors computed
        elif self.own.baseline == "mean":
            weights = returns - global_mean_std(returns, self.reducer)[0]
        else:
            weights = returns
        if self.algo.normalize_advantage:
            mean, std = global_mean_std(weights, self.reducer)
            weights = (weights - mean) / (std + 1e-8)
        if self.own.clip_weights is not None:
            weights = weights.clamp(-self.own.clip_weights, self.own.clip_weights)
        policy_loss = -(log_probs * weights.detach()).mean()
        baseline_loss = value_error(values, batch.returns)
        coef = self.algo.vf_coef if self.own.baseline == "value" else 0.0
        bonus, entropy_mean = entropy_bonus(entropy, self.algo.ent_coef)
        loss = policy_loss + coef * baseline_loss - bonus
        return loss, stat_floats(self.stat_names, [policy_loss, baseline_loss, entropy_mean])
