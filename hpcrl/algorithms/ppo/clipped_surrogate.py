"""PPO: clipped surrogate objective over epochs x minibatches of each rollout."""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch

from hpcrl.algorithms.algorithm import linear_schedule
from hpcrl.algorithms.capabilities import Capabilities
from hpcrl.algorithms.demo_replay import DemoPlay, demo_slots, replayed_log_probs
from hpcrl.algorithms.key_rules import clip_or_null, positive
from hpcrl.algorithms.on_policy import OnPolicyAlgorithm, entropy_bonus, value_error
from hpcrl.algorithms.ppo import PpoConfig
from hpcrl.buffers.rollout import Rollout
from hpcrl.buffers.rollout_storage import GaeBatch, RolloutStorage
from hpcrl.numerics.compiling import stat_floats


def epoch_seed(seed: int, update: int, epoch: int) -> int:
    """The batch-order seed of one epoch, equal on every process of the job."""
    return int(np.random.SeedSequence([seed, update, epoch]).generate_state(1)[0])


class PPO(OnPolicyAlgorithm[RolloutStorage, GaeBatch]):
    """Proximal policy optimisation (Schulman et al. 2017) with the usual refinements.

    The value loss is the mean squared error to the GAE returns; with ``clip_range_vf`` the
    predicted value is first clipped to ``old_value +- clip_range_vf`` (as Stable-Baselines3
    does). Learning rate and clip range follow their schedules through ``set_progress``.
    """

    kind = "ppo"
    section = "ppo"
    section_keys = PpoConfig
    # RL-zoo's CartPole PPO: the schema's own defaults, listed so that they are complete
    defaults = {"env.num_envs": 8, "actor.hidden_sizes": [64, 64], "actor.activation": "tanh",
                "actor.ortho_init": True, "algo.num_steps": 32, "algo.gamma": 0.98,
                "algo.lr": 1e-3, "algo.lr_schedule": "linear", "algo.max_grad_norm": 0.5,
                "algo.optimizer": "adam", "algo.optimizer_eps": 1e-5, "algo.ent_coef": 0.0,
                "algo.vf_coef": 0.5, "algo.gae_lambda": 0.8, "algo.normalize_advantage": True}
    section_rules = (("num_epochs", positive), ("minibatch_size", positive),
                     ("clip_range", positive), ("clip_range_vf", clip_or_null))
    stat_names = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction")
    capabilities = Capabilities("rollouts", "gae", "sampled policy", minibatched_epochs=True,
                                demonstrations=True)

    @classmethod
    def slot_play(cls, own: Any, total_envs: int) -> DemoPlay | None:
        """PPO+D: a fraction of the job's slots replays the demonstrations of
        ``algo.ppo.demos`` (none without a file)."""
        return DemoPlay(own, total_envs) if own.demos else None

    def prepare_rollouts(self, rollouts: Sequence[Rollout], total_envs: int) -> None:
        """PPO+D: the demonstrated actions' log-probabilities under the weights the update
        starts with, in the replay slots (their collectors stored their own samples')."""
        own = self.own
        if own.demos:
            replayed_log_probs(self.actor, rollouts, demo_slots(total_envs,
                                                                own.demos_fraction))

    @property
    def clip_range(self) -> float:
        """``algo.ppo.clip_range`` under ``algo.ppo.clip_schedule`` at the current
        progress."""
        own = self.own
        return linear_schedule(own.clip_range, own.clip_schedule, self.progress)

    def minibatches(self, storage: RolloutStorage, update: int, seed: int, total_envs: int,
                    count: int) -> Iterator[GaeBatch]:
        """``count`` env-stratified minibatches per epoch for ``algo.ppo.num_epochs`` epochs, each
        epoch's order seeded by ``(seed, update, epoch)`` over the job's envs."""
        for epoch in range(self.own.num_epochs):  # one minibatch needs no order
            order = epoch_seed(seed, update, epoch) if count > 1 else 0
            yield from storage.minibatches(count, order, total_envs)

    def steps_per_update(self, count: int) -> int:
        """``algo.ppo.num_epochs x count``."""
        return self.own.num_epochs * count

    def loss(self, batch: GaeBatch) -> tuple[torch.Tensor, dict[str, float]]:
        """The clipped surrogate, the value error (clipped with ``algo.ppo.clip_range_vf``) and the
        entropy bonus; also reports the approximate KL and the clipped fraction."""
        cfg = self.algo
        log_probs, entropy, values, batch = self.evaluate(batch)
        advantages = self.advantages(batch)
        log_ratio = log_probs - batch.log_probs
        ratio = log_ratio.exp()
        clip = self.clip_range
        surrogate = torch.min(ratio * advantages, ratio.clamp(1 - clip, 1 + clip) * advantages)
        policy_loss = -surrogate.mean()
        clip_vf = self.own.clip_range_vf
        if clip_vf is not None:
            values = batch.values + (values - batch.values).clamp(-clip_vf, clip_vf)
        value_loss = value_error(values, batch.returns)
        bonus, entropy_mean = entropy_bonus(entropy, cfg.ent_coef)
        loss = policy_loss - bonus + cfg.vf_coef * value_loss
        with torch.no_grad():
            approx_kl = ((ratio - 1) - log_ratio).mean()
            clip_fraction = ((ratio - 1).abs() > clip).float().mean()
        return loss, stat_floats(PPO.stat_names, [policy_loss, value_loss, entropy_mean,
                                                  approx_kl, clip_fraction])
