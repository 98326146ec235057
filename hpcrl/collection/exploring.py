"""How an off-policy collector explores, as its algorithm declares it.

An algorithm declares its exploration in its capabilities
(:attr:`~hpcrl.algorithms.capabilities.Capabilities.exploration`), and the transition filler
explores by the class :data:`EXPLORATIONS` holds for that value: epsilon-greedy over a
Q-network's argmax (DQN), the policy's own samples (SAC, MPO), the deterministic action
plus exploration noise (TD3, DDPG), or plans (MPC). Each says what its actions are
(integer indices, or ``[-1, 1]`` vectors that the policy's ``scale`` maps to the env), draws
every random number a chunk may use up front, per env from the env's own generator, in a
fixed order (uniformly random actions during the warm-up before ``replay.learning_starts``,
then what it explores with), hands the policy the noise it samples with, and turns the
policy's actions into the exploring ones. The draws of env ``i`` of the job come from its
own generator, so the transitions do not depend on how envs are spread over processes.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar, cast

import gymnasium as gym
import numpy as np
from torch import nn

from hpcrl.algorithms.own_section import epsilon_keys, own_section
from hpcrl.envs.vector import as_discrete
from hpcrl.models.epsilon import collector_epsilon, linear_epsilon
from hpcrl.models.exploration import make_noise, standard_normal
from hpcrl.sections.algorithm_keys import DdpgConfig, DqnConfig
from hpcrl.sections.schema import AlgoConfig

if TYPE_CHECKING:  # annotations only
    from hpcrl.models.continuous_policies import ActionScale


def exploration_noise_keys(algo: AlgoConfig) -> DdpgConfig:
    """The action-noise keys of a deterministic policy: its algorithm's own section (TD3's
    or DDPG's, or a plug-in's of them). A deterministic plug-in that derives from
    ``hpcrl.OffPolicyAlgorithm`` directly has no noise section (validation refuses
    ``algo.ddpg`` for it), so it explores with DDPG's default noise; deriving from
    ``hpcrl.DDPG`` makes the keys its own."""
    own = own_section(algo)
    return own if isinstance(own, DdpgConfig) else DdpgConfig()


class Exploration(ABC):
    """How a collector explores: what its actions are, the random numbers a chunk draws,
    the noise the policy acts with, and the exploring actions made of the policy's.

    Built from the algorithm's section ``algo``, the acting ``policy``, the env's single
    action ``space``, the collector's ``num_envs``, its place ``collector_index`` of
    ``collector_count`` and the job's ``total_env_steps``.
    """

    integer_actions: ClassVar[bool] = False  # actions are env indices (no scale)
    # the policy acts with a standard normal per action dimension (an inference rank's
    # requests carry them)
    noisy_policy: ClassVar[bool] = False
    action_dim: int  # floats of one action (0 for an index)
    action_shape: tuple[int, ...]  # of one env's action as the transitions keep it
    scale: ActionScale | None  # the map of [-1, 1] actions to the env's (None: indices)

    @abstractmethod
    def __init__(self, algo: AlgoConfig, policy: nn.Module, space: gym.Space, num_envs: int,
                 collector_index: int, collector_count: int, total_env_steps: int) -> None:
        """Every exploration is built from the same facts (the class docstring); each
        keeps what it reads of them."""

    @abstractmethod
    def draw(self, rngs: list[np.random.Generator], steps: int, random_phase: bool
             ) -> dict[str, np.ndarray]:
        """Every random number a chunk of ``steps`` steps may use, env ``i``'s from
        ``rngs[i]`` (``random_phase``: the chunk starts before ``replay.learning_starts``)."""

    def policy_noise(self, draws: dict[str, np.ndarray], t: int, cols: slice
                     ) -> np.ndarray | None:
        """The noise the policy acts with at step ``t`` for envs ``cols``: their standard
        normals where it samples (:attr:`noisy_policy`), else None."""
        return draws["normal"][t, cols] if self.noisy_policy else None

    @abstractmethod
    def choose(self, draws: dict[str, np.ndarray], t: int, cols: slice, job_steps: int,
               policy: np.ndarray | None) -> np.ndarray:
        """The exploring actions of step ``t`` of the chunk for envs ``cols``, ``job_steps``
        into the job, given the ``policy``'s actions (None: the random warm-up)."""

    def reset(self, done: np.ndarray, cols: slice) -> None:
        """The episodes of the envs ``cols`` that ``done`` marks ended (nothing carried)."""
        return None

    def state_dict(self) -> dict[str, Any]:
        """What it carries between chunks, for the collector's checkpoint (nothing)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (nothing)."""
        return None


class ContinuousExploration(Exploration):
    """Continuous exploration in the policy's ``[-1, 1]`` action space: uniform random
    actions during the warm-up, the policy's actions after it. A continuous policy declares
    its :class:`~hpcrl.models.continuous_policies.ActionScale` as ``scale``."""

    draws_normals: ClassVar[bool] = False  # a standard normal per action dimension and step

    def __init__(self, algo: AlgoConfig, policy: nn.Module, space: gym.Space, num_envs: int,
                 collector_index: int, collector_count: int, total_env_steps: int) -> None:
        self.action_dim = int(np.prod(space.shape or ()))
        self.action_shape = (self.action_dim,)
        self.scale = cast("ActionScale", policy.scale)
        self.normals = self.draws_normals

    def draw(self, rngs: list[np.random.Generator], steps: int, random_phase: bool
             ) -> dict[str, np.ndarray]:
        """The warm-up's uniform actions (when ``random_phase``), then standard normals
        where it draws them, per env."""
        draws: dict[str, np.ndarray] = {}
        if random_phase:
            draws["random"] = np.stack([r.uniform(-1.0, 1.0, (steps, self.action_dim))
                                        for r in rngs], axis=1).astype(np.float32)
        if self.normals:
            draws["normal"] = standard_normal(rngs, steps, self.action_dim)
        return draws

    def choose(self, draws: dict[str, np.ndarray], t: int, cols: slice, job_steps: int,
               policy: np.ndarray | None) -> np.ndarray:
        """The policy's actions, or the warm-up's random ones."""
        return draws["random"][t, cols] if policy is None else policy


class SampledPolicy(ContinuousExploration):
    """The policy's own samples (a squashed Gaussian's: SAC, MPO), drawn with a standard
    normal per action dimension from each env's generator."""

    draws_normals = noisy_policy = True


class Planning(ContinuousExploration):
    """The planner's actions (MPC): its noise comes from each env's planning stream, which
    the engine keeps (:class:`~hpcrl.models.model_based.planning_engine.PlanningEngine`)."""


class ActionNoise(ContinuousExploration):
    """The deterministic action plus exploration noise (TD3, DDPG: ``action_noise``,
    Gaussian or Ornstein-Uhlenbeck, from the algorithm's section), clipped to ``[-1, 1]``;
    the noise processes restart where an episode ends and are kept in the checkpoint."""

    def __init__(self, algo: AlgoConfig, policy: nn.Module, space: gym.Space, num_envs: int,
                 collector_index: int, collector_count: int, total_env_steps: int) -> None:
        super().__init__(algo, policy, space, num_envs, collector_index, collector_count,
                         total_env_steps)
        keys = exploration_noise_keys(algo)
        self.noise = make_noise(keys.action_noise, num_envs, self.action_dim,
                                keys.noise_std, keys.ou_theta, keys.ou_dt)
        self.normals = self.noise is not None  # (action_noise "none": no noise to draw)

    def choose(self, draws: dict[str, np.ndarray], t: int, cols: slice, job_steps: int,
               policy: np.ndarray | None) -> np.ndarray:
        """The policy's (or the warm-up's) actions plus the noise's step, clipped."""
        actions = super().choose(draws, t, cols, job_steps, policy)
        if self.noise is not None:
            actions = np.clip(actions + self.noise.step(draws["normal"][t, cols], cols),
                              -1.0, 1.0)
        return actions.astype(np.float32)

    def reset(self, done: np.ndarray, cols: slice) -> None:
        """Restart the noise processes of the envs whose episode ended."""
        if self.noise is not None:
            self.noise.reset(done, cols)

    def state_dict(self) -> dict[str, Any]:
        """The noise processes' state."""
        return self.noise.state_dict() if self.noise is not None else {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the noise processes."""
        if self.noise is not None:
            self.noise.load_state_dict(state)


class EpsilonGreedy(Exploration):
    """Epsilon-greedy over a Q-network's argmax actions (DQN): with probability epsilon a
    uniformly random action. Epsilon follows the linear schedule of the algorithm's epsilon
    keys over the job's env steps, or, under Ape-X's ``per_collector_eps``, is this
    collector's fixed one."""

    integer_actions = True

    def __init__(self, algo: AlgoConfig, policy: nn.Module, space: gym.Space, num_envs: int,
                 collector_index: int, collector_count: int, total_env_steps: int) -> None:
        self.num_actions = int(as_discrete(space).n)
        self.action_dim, self.action_shape, self.scale = 0, (), None
        self.total_env_steps = total_env_steps
        # epsilon-greedy's keys, as the algorithm's class reads them from its own section
        self.epsilon = epsilon_keys(algo) or DqnConfig()
        self.fixed_eps = (collector_epsilon(collector_index, collector_count,
                                            self.epsilon.collector_eps_base,
                                            self.epsilon.collector_eps_alpha)
                          if self.epsilon.per_collector_eps else None)

    def draw(self, rngs: list[np.random.Generator], steps: int, random_phase: bool
             ) -> dict[str, np.ndarray]:
        """A uniform to compare with epsilon and a random action for every step, warm-up
        or not."""
        return {"explore": np.stack([r.random(steps) for r in rngs], axis=1),
                "random": np.stack([r.integers(0, self.num_actions, steps) for r in rngs],
                                   axis=1)}

    def choose(self, draws: dict[str, np.ndarray], t: int, cols: slice, job_steps: int,
               policy: np.ndarray | None) -> np.ndarray:
        """The random action where the step's uniform falls below epsilon (always during the
        warm-up), else the greedy one."""
        if policy is None:
            return draws["random"][t, cols]
        eps = self.fixed_eps
        if eps is None:
            eps = linear_epsilon(self.epsilon.exploration_initial_eps,
                                 self.epsilon.exploration_final_eps,
                                 self.epsilon.exploration_fraction,
                                 job_steps / self.total_env_steps)
        return np.where(draws["explore"][t, cols] < eps, draws["random"][t, cols], policy)


# how a collector explores, by the value of its algorithm's Capabilities.exploration
EXPLORATIONS: dict[str, type[Exploration]] = {
    "epsilon-greedy": EpsilonGreedy, "sampled policy": SampledPolicy,
    "action noise": ActionNoise, "planning": Planning}
