"""MPC: model-predictive control over a learned world model (PETS, Chua et al. 2018; PDDM,
Nagabandi et al. 2019; the seed's MPC with RS, CEM and PDDM).

The learner fits an ensemble of probabilistic dynamics models
(:class:`~hpcrl.models.model_based.world_model.WorldModel`) to the replay: each gradient step
samples ``replay.batch_size`` transitions, gives every member its own bootstrap of them
(rows drawn with replacement from the learner's generator) and descends the members' summed
Gaussian negative log-likelihood of the observation's change (and of the reward, where the
env gives no reward function). The statistics that standardise the model's inputs and
targets are those of every transition the replay took (:meth:`MPC.observe`), folded in at
each gradient step.

There is no policy network: the policy it publishes
(:class:`~hpcrl.models.model_based.policy.PlanningPolicy`) is the model with a planner, which
plans every action of the collectors (and of evaluations) over the newest model it received.
One segment (``model``) holds the model's parameters; there are no target networks.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from hpcrl.algorithms.capabilities import Capabilities
from hpcrl.algorithms.key_rules import below_one, in_unit, not_negative, positive, unread
from hpcrl.algorithms.mpc import MpcConfig
from hpcrl.algorithms.off_policy import CONTINUOUS_DEFAULTS, OffPolicyAlgorithm
from hpcrl.buffers.replay.buffer import ReplayBatch
from hpcrl.buffers.replay.transitions import Transitions
from hpcrl.envs.vector import EnvSpaces
from hpcrl.models.model_based.policy import PlanningPolicy
from hpcrl.models.model_based.rewards import reward_function, reward_spec_problem
from hpcrl.numerics.flat import buffers_to_flat, flat_to_buffers
from hpcrl.numerics.normalization import Moments, merge_moments
from hpcrl.sections.schema import ActorConfig

if TYPE_CHECKING:  # annotations only
    from hpcrl.algorithms.algorithm import AlgorithmSettings

#: The planners that read each planner-specific key of ``algo.mpc``.
PLANNER_KEYS: dict[str, tuple[str, ...]] = {
    "elites": ("cem",), "cem_alpha": ("cem",), "beta": ("pddm",), "gamma": ("pddm",),
    "iterations": ("cem", "pddm"), "sample_std": ("cem", "pddm")}


class MPC(OffPolicyAlgorithm):
    """A world model learnt from a replay, and a planner that acts through it."""

    kind = "mpc"
    section = "mpc"
    section_keys = MpcConfig
    # the world model's network and rhythm (model-based agents train their model several
    # steps per env step); undiscounted planning, as PETS
    defaults = {**CONTINUOUS_DEFAULTS, "actor.hidden_sizes": [64, 64], "actor.activation": "relu",
                "algo.lr": 1e-3, "algo.gamma": 1.0, "replay.learning_starts": 200,
                "replay.gradient_steps": 4}
    section_rules = (*[(key, positive) for key in ("ensemble_size", "horizon", "candidates",
                                                   "iterations", "elites", "sample_std")],
                     ("cem_alpha", below_one),
                     ("beta", lambda key, value: in_unit(key, value, True)),
                     ("gamma", not_negative), ("weight_decay", not_negative))
    stat_names = ("model_loss", "dynamics_mse", "reward_mse")
    capabilities = Capabilities("replay", "replay", "planning", actions=("box",),
                                image_observations=False, bounded_actions=True,
                                predicts_observations=True)

    @classmethod
    def section_problem(cls, own: MpcConfig) -> str | None:
        """A planner's keys set for another planner (they would be ignored), more elites
        than candidates, or a reward function that cannot be loaded."""
        section = f"algo.{cls.section_name()}"
        for key, readers in PLANNER_KEYS.items():
            if own.planner not in readers:
                planners = " or ".join(readers)
                problems = unread(section, own, [key], f"{section}.planner={planners}",
                                  f"set {section}.planner={planners}")
                if problems:
                    return problems[0]
        if own.planner == "cem" and own.elites > own.candidates:
            return (f"config key '{section}.elites' ({own.elites}) must not exceed "
                    f"{section}.candidates ({own.candidates})")
        return reward_spec_problem(own.reward_fn)

    @classmethod
    def acting_policy(cls, spaces: EnvSpaces, actor: ActorConfig) -> nn.Module:
        """MPC's policy is a planner over its world model, both sized by the section
        ``algo.mpc``, which ``actor`` does not hold: it is built by :meth:`policy_for` from
        the algorithm's settings (hpcrl builds every policy through it), and refused here."""
        raise TypeError(f"{cls.__name__}'s planning policy is sized by its config section "
                        f"algo.mpc, which the actor's section does not hold: build it with "
                        f"{cls.__name__}.policy_for(spaces, settings)")

    @classmethod
    def fresh_policy(cls, spaces: EnvSpaces, settings: AlgorithmSettings) -> nn.Module:
        """The planning policy of ``settings``: its own section's planner (``algo.mpc``, or
        the section a plug-in subclass declares: ``settings.own``, which :attr:`own` holds
        too, so the model the learner trains and the planner the collectors run are sized
        alike), ``algo.gamma`` as the planning discount, and the reward its ``reward_fn``
        names (over the env of ``settings.env``)."""
        own: MpcConfig = settings.own
        return PlanningPolicy(spaces, settings.actor, own, settings.algo.gamma,
                              reward_function(own.reward_fn, settings.env))

    def build(self) -> list[tuple[str, nn.Module]]:
        """The planning policy, whose parameters are the world model's (segment ``model``)."""
        policy = self.fresh_policy(self.spaces, self.settings)
        assert isinstance(policy, PlanningPolicy)
        self.planning = policy
        self.planner_keys: MpcConfig = self.own
        # the moments of the inputs and targets observed since the last gradient step
        self.pending: tuple[Moments, Moments] | None = None
        return [("model", policy)]

    @property
    def policy(self) -> nn.Module:
        """The planning policy (the model and its planner)."""
        return self.planning

    def observe(self, chunk: Transitions) -> None:
        """Note the moments of the chunk's transitions; they reach the model's statistics
        at its next gradient step, so the statistics change only where the weights do (and
        a published model, or a resumed collector's, plans with what it was trained with)."""
        k = chunk.count
        if k == 0:
            return
        encode = self.planning.obs_format.encode_numpy
        moments = self.planning.model.moments(encode(chunk.obs[:k]), chunk.actions[:k],
                                              encode(chunk.next_obs[:k]), chunk.rewards[:k])
        self.pending = moments if self.pending is None else (
            merge_moments([self.pending[0], moments[0]]),
            merge_moments([self.pending[1], moments[1]]))

    def loss(self, batch: ReplayBatch) -> tuple[torch.Tensor, dict[str, float]]:
        """The model's loss on ``batch``, each member on its own bootstrap of the rows (the
        transitions observed since the last step first join the statistics)."""
        fmt, model = self.planning.obs_format, self.planning.model
        if self.pending is not None:
            model.merge(*self.pending)
            self.pending = None
        b = batch.rewards.shape[0]
        rows = torch.randint(0, b, (model.members, b), generator=self.generator)
        return model.loss(fmt.encode(batch.obs), batch.actions, fmt.encode(batch.next_obs),
                          batch.rewards, rows.to(self.device), self.planner_keys.weight_decay)

    def stepping(self, step: int) -> list[str]:
        """The one segment, every step."""
        return ["model"]

    def update_targets(self, step: int) -> None:
        """Nothing: MPC keeps no target networks."""

    def state_dict(self) -> dict[str, Any]:
        """The base's state, the model's statistics (buffers, not parameters) and the
        moments observed since the last step."""
        pending = [] if self.pending is None else [
            {"count": m.count, "mean": torch.from_numpy(np.asarray(m.mean, np.float64)),
             "m2": torch.from_numpy(np.asarray(m.m2, np.float64))} for m in self.pending]
        return {**super().state_dict(), "statistics": buffers_to_flat(self.planning),
                "pending": pending}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        super().load_state_dict(state)
        flat_to_buffers(self.planning, state["statistics"])
        parts = [Moments(float(m["count"]), m["mean"].numpy(), m["m2"].numpy())
                 for m in state["pending"]]
        self.pending = (parts[0], parts[1]) if parts else None
