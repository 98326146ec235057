"""What an algorithm learns from and what it supports, declared once on its class.

Config validation, the scheme planner, the collectors and the placements ask an algorithm's
:class:`Capabilities` (``algorithm_capabilities(config.algo.name)``, from
:mod:`hpcrl.algorithms`) instead of testing its name, so a new algorithm, or a plug-in
subclass, is described in one place: its class.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import gymnasium as gym

Storage = Literal["gae", "vtrace", "replay"]
ActionKind = Literal["discrete", "box", "multi_discrete", "multi_binary"]
EVERY_ACTION_KIND: tuple[ActionKind, ...] = ("discrete", "box", "multi_discrete", "multi_binary")
SPACE_NAMES: dict[str, str] = {"discrete": "Discrete", "box": "Box",
                               "multi_discrete": "MultiDiscrete", "multi_binary": "MultiBinary"}
ACTION_WORDS: dict[str, str] = {"discrete": "discrete", "box": "continuous",
                                "multi_discrete": "multi-discrete", "multi_binary": "binary"}


def action_kind(space: gym.Space) -> str:
    """Which of :data:`EVERY_ACTION_KIND` an action space is (its class name in lower case
    for any other)."""
    for kind, cls in (("discrete", gym.spaces.Discrete), ("box", gym.spaces.Box),
                      ("multi_discrete", gym.spaces.MultiDiscrete),
                      ("multi_binary", gym.spaces.MultiBinary)):
        if isinstance(space, cls):
            return kind
    return type(space).__name__.lower()


@dataclass(frozen=True)
class Capabilities:
    """An algorithm's declared needs and abilities.

    ``learns_from``: ``"rollouts"`` (on-policy: every update trains on the rollouts just
    collected, which the collectors stream whole) or ``"replay"`` (off-policy: transitions go
    into a replay that one learner samples from). ``storage``: the batches it trains on,
    GAE rollouts, V-trace sequences or replay samples. ``minibatched_epochs``: each rollout is
    cut into ``algo.ppo.minibatch_size`` minibatches for ``algo.ppo.num_epochs`` epochs
    (PPO), rather than one gradient step per rollout. ``actions``: the action spaces it acts in.
    ``image_observations``: its networks take images through ``actor.encoder``.
    ``bounded_actions``: it squashes continuous actions into the space's [low, high], so
    the bounds must be finite.
    ``exploration``: how it explores (its collectors' side). ``target_networks``: it keeps
    slowly-updated copies of its networks. ``acting_q_values``: it acts through a Q-network,
    whose values let its collectors compute TD errors (``algo.dqn.initial_priorities``).
    ``demonstrations``: it learns from a demonstration file (``algo.ppo.demos``, PPO+D).
    ``goal_relabelling``: its replay can relabel goals (``replay.her_strategy``).
    ``predicts_observations``: its learner fits a model that predicts the next observation
    from the replay (MPC's world model), so its observations must be vectors, whatever
    ``actor.encoder``: image observations are refused. An algorithm that explores by
    ``"planning"`` keeps each env's plan between steps where it acts (see
    :attr:`remote_acting`).
    """

    learns_from: Literal["rollouts", "replay"]
    storage: Storage
    exploration: Literal["sampled policy", "epsilon-greedy", "action noise", "planning"]
    minibatched_epochs: bool = False
    actions: tuple[ActionKind, ...] = EVERY_ACTION_KIND
    image_observations: bool = True
    bounded_actions: bool = False
    target_networks: bool = False
    acting_q_values: bool = False
    demonstrations: bool = False
    goal_relabelling: bool = False
    predicts_observations: bool = False

    @property
    def replay(self) -> bool:
        """It learns from a replay: transitions stream to one learner rank that holds it,
        the collectors act through a numpy copy of the policy on the CPU, and the replay
        keeps raw observations and rewards (no running normalisation)."""
        return self.learns_from == "replay"

    @property
    def recurrent(self) -> bool:
        """It can train a recurrent actor: on-policy rollouts carry the memory state that a
        replay of single transitions does not hold."""
        return self.learns_from == "rollouts"

    @property
    def own_networks(self) -> bool:
        """It trains a user's actor-critic network (``actor.network``); a replay agent builds
        its Q-networks and policies from ``actor.hidden_sizes`` and ``actor.encoder``."""
        return self.learns_from == "rollouts"

    @property
    def remote_acting(self) -> bool:
        """It can act on an inference rank: its acting is one forward of the step's
        observations (and recurrent state). A planner keeps each env's plan and its noise
        streams on the collector between steps, which an inference rank does not hold."""
        return self.exploration != "planning"

    @property
    def intrinsic_rewards(self) -> bool:
        """RND can add its intrinsic value head and advantages: on-policy GAE batches."""
        return self.learns_from == "rollouts" and self.storage == "gae"

    def summary(self) -> str:
        """The capabilities in a few words, for ``hpcrl plan``."""
        batches = {"gae": "GAE", "vtrace": "V-trace", "replay": "replay"}[self.storage]
        parts = ["off-policy, learns from a replay" if self.replay
                 else f"on-policy, learns from rollouts ({batches} batches)",
                 f"explores by {self.exploration}"]
        if self.minibatched_epochs:
            parts.append("minibatched epochs")
        if self.target_networks:
            parts.append("target networks")
        return ", ".join(parts)


ON_POLICY_GAE = Capabilities("rollouts", "gae", "sampled policy")
