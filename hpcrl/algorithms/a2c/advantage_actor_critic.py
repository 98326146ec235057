"""A2C: one synchronous advantage actor-critic step on the whole rollout."""
from __future__ import annotations

from collections.abc import Iterator

import torch

from hpcrl.algorithms.on_policy import OnPolicyAlgorithm, entropy_bonus, value_error
from hpcrl.buffers.rollout_storage import GaeBatch, RolloutStorage
from hpcrl.numerics.compiling import stat_floats


class A2C(OnPolicyAlgorithm[RolloutStorage, GaeBatch]):
    """Advantage actor-critic (Mnih et al. 2016, synchronous form): policy gradient with GAE
    advantages, a squared-error value loss and an entropy bonus, one step per rollout."""

    kind = "a2c"
    # SB3's A2C (RMSprop, 5-step rollouts, Monte-Carlo advantages), RL-zoo's 8 envs
    defaults = {"env.num_envs": 8, "actor.hidden_sizes": [64, 64], "actor.activation": "tanh",
                "actor.ortho_init": True, "algo.num_steps": 5, "algo.gamma": 0.99,
                "algo.lr": 7e-4, "algo.lr_schedule": "constant", "algo.max_grad_norm": 0.5,
                "algo.optimizer": "rmsprop", "algo.optimizer_eps": 1e-5, "algo.ent_coef": 0.0,
                "algo.vf_coef": 0.5, "algo.gae_lambda": 1.0, "algo.normalize_advantage": False}
    stat_names = ("policy_loss", "value_loss", "entropy")

    def minibatches(self, storage: RolloutStorage, update: int, seed: int, total_envs: int,
                    count: int) -> Iterator[GaeBatch]:
        """The whole rollout as one batch: A2C takes one step per update."""
        yield storage.full_batch()

    def steps_per_update(self, count: int) -> int:
        """1, whatever ``count``: one step on the full batch."""
        return 1

    def loss(self, batch: GaeBatch) -> tuple[torch.Tensor, dict[str, float]]:
        """Policy gradient on the (normalised) GAE advantages, plus ``algo.vf_coef`` x the value
        error, minus ``algo.ent_coef`` x the mean entropy."""
        cfg = self.algo
        log_probs, entropy, values, batch = self.evaluate(batch)
        advantages = self.advantages(batch)
        policy_loss = -(advantages.detach() * log_probs).mean()
        value_loss = value_error(values, batch.returns)
        bonus, entropy_mean = entropy_bonus(entropy, cfg.ent_coef)
        loss = policy_loss - bonus + cfg.vf_coef * value_loss
        return loss, stat_floats(("policy_loss", "value_loss", "entropy"),
                                 [policy_loss, value_loss, entropy_mean])
