"""DQN (Mnih et al. 2015) with double Q-learning (van Hasselt et al. 2016) and target updates.

The loss is the Huber loss of ``Q(s, a)`` against ``r + discount * Q_target(s', a*)`` with
``a* = argmax_a Q(s', a)`` under double Q-learning (``argmax`` of the target network
otherwise), weighted by importance weights under prioritised replay. The target network
moves every ``replay.target_update_interval`` applied gradient steps by ``replay.tau``.
"""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from hpcrl.algorithms.capabilities import Capabilities
from hpcrl.algorithms.dqn import DqnConfig
from hpcrl.algorithms.key_rules import in_unit, not_negative
from hpcrl.algorithms.off_policy import OffPolicyAlgorithm
from hpcrl.buffers.replay.buffer import ReplayBatch
from hpcrl.envs.vector import EnvSpaces, as_discrete
from hpcrl.models.qnetwork import QNetwork
from hpcrl.models.target import TargetNetwork
from hpcrl.numerics.compiling import stat_floats
from hpcrl.sections.schema import ActorConfig


class DQN(OffPolicyAlgorithm):
    """One Q-network segment (``q``) and its target."""

    kind = "dqn"
    section = "dqn"
    section_keys = DqnConfig
    # RL-zoo's CartPole DQN with 3-step returns and a linearly decaying learning rate (SB3's
    # DQN defaults are Atari's: a target update every 10k steps learns nothing on CartPole)
    defaults = {"env.num_envs": 1, "actor.hidden_sizes": [256, 256], "actor.activation": "relu",
                "actor.ortho_init": False, "algo.num_steps": 1024, "algo.gamma": 0.99,
                "algo.lr": 2.3e-3, "algo.lr_schedule": "linear", "algo.max_grad_norm": 10.0,
                "algo.optimizer": "adam", "algo.optimizer_eps": 1e-8,
                "replay.buffer_size": 100_000, "replay.batch_size": 64,
                "replay.learning_starts": 1000, "replay.train_freq": 256,
                "replay.gradient_steps": 128, "replay.tau": 1.0,
                "replay.target_update_interval": 128, "replay.n_step": 3}
    section_rules = (("exploration_initial_eps", in_unit), ("exploration_final_eps", in_unit),
                     ("exploration_fraction", in_unit), ("collector_eps_base", in_unit),
                     ("collector_eps_alpha", not_negative))
    stat_names = ("q_loss", "q_mean")
    capabilities = Capabilities("replay", "replay", "epsilon-greedy", actions=("discrete",),
                                target_networks=True, acting_q_values=True)

    @classmethod
    def collector_priorities(cls, own: Any) -> bool:
        """Whether ``algo.dqn.initial_priorities`` is ``collector`` (Ape-X): the collectors
        compute each transition's |n-step TD error| with their copy of the Q-network."""
        return bool(own.initial_priorities == "collector")

    @classmethod
    def acting_policy(cls, spaces: EnvSpaces, actor: ActorConfig) -> nn.Module:
        """The greedy Q-network over ``spaces``."""
        return QNetwork(spaces.obs_shape, int(as_discrete(spaces.action_space).n), actor,
                        spaces.obs_format)

    def build(self) -> list[tuple[str, nn.Module]]:
        """The Q-network (segment ``q``) and its target."""
        self.q = QNetwork(self.spaces.obs_shape, int(as_discrete(self.spaces.action_space).n),
                          self.settings.actor, self.spaces.obs_format)
        self.target_q = TargetNetwork(self.q)  # typed: its module is a QNetwork
        self.targets["q"] = self.target_q
        return [("q", self.q)]

    @property
    def policy(self) -> nn.Module:
        """The Q-network: collectors act greedily (or epsilon-greedily) on it."""
        return self.q

    def loss(self, batch: ReplayBatch) -> tuple[torch.Tensor, dict[str, float]]:
        """Huber loss of ``Q(s, a)`` to the target network's bootstrapped value (double Q with
        ``algo.dqn.double_q``), weighted by the importance weights of a prioritised batch."""
        target_q = self.target_q.module
        obs, next_obs = batch.obs, batch.next_obs  # as carried: the encoder takes them
        q = self.q.q_values(obs).gather(1, batch.actions.unsqueeze(1)).squeeze(1)
        with torch.no_grad():
            next_q = target_q.q_values(next_obs)
            if self.own.double_q:
                best = self.q.q_values(next_obs).argmax(dim=1, keepdim=True)
                next_value = next_q.gather(1, best).squeeze(1)
            else:
                next_value = next_q.max(dim=1).values
            target = batch.rewards + batch.discounts * next_value
        if batch.weights is None:
            loss = F.smooth_l1_loss(q, target)
        else:
            loss = (batch.weights * F.smooth_l1_loss(q, target, reduction="none")).mean()
            self.remember_td_errors(q - target)
        return loss, stat_floats(("q_loss", "q_mean"), [loss, q.detach().mean()])

    def stepping(self, step: int) -> list[str]:
        """``['q']``: the one segment steps every time."""
        return ["q"]

    def update_targets(self, step: int) -> None:
        """Move the target towards the Q-network by ``replay.tau`` every
        ``replay.target_update_interval`` steps."""
        if step % self.replay.target_update_interval == 0:
            self.targets["q"].update(self.segment_params("q"), self.replay.tau)
