"""Off-policy algorithms (DQN, SAC, TD3, DDPG, MPO) and the policies they publish."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from hpcrl.config.offpolicy import CONTINUOUS_OFF_POLICY
from hpcrl.config.schema import ActorConfig, Config
from hpcrl.core.algorithms.offpolicy.base import OffPolicyAlgorithm, Segment
from hpcrl.core.algorithms.offpolicy.dqn import DQN
from hpcrl.core.algorithms.offpolicy.mpo import MPO
from hpcrl.core.algorithms.offpolicy.sac import SAC
from hpcrl.core.algorithms.offpolicy.td3 import DDPG, TD3
from hpcrl.core.envs import EnvSpaces, as_box, as_discrete
from hpcrl.core.policies import DeterministicPolicy, SquashedGaussianPolicy
from hpcrl.core.qnetwork import QNetwork

OFF_POLICY_ALGORITHMS: dict[str, type[OffPolicyAlgorithm]] = {
    "dqn": DQN, "sac": SAC, "td3": TD3, "ddpg": DDPG, "mpo": MPO}


def action_space_problem(name: str, spaces: EnvSpaces, env_id: str) -> str | None:
    """Why ``algo.name`` cannot act in this env's action space, or None."""
    if name == "dqn" and not spaces.discrete:
        return (f"config key 'algo.name': dqn needs a Discrete action space but env '{env_id}' "
                f"has {spaces.action_space}; use sac, td3 or ddpg for continuous actions")
    if name in CONTINUOUS_OFF_POLICY and not isinstance(spaces.action_space, gym.spaces.Box):
        return (f"config key 'algo.name': {name} needs a Box action space but env '{env_id}' "
                f"has {spaces.action_space}; use dqn for discrete actions")
    if name in CONTINUOUS_OFF_POLICY and not (
            np.all(np.isfinite(as_box(spaces.action_space).low))
            and np.all(np.isfinite(as_box(spaces.action_space).high))):
        space = spaces.action_space
        return (f"config key 'algo.name': {name} squashes its actions into the action "
                f"space's [low, high], and env '{env_id}' has unbounded actions {space}; "
                f"bound them with a wrapper (env.wrappers: gymnasium.wrappers:ClipAction "
                f"after one that sets the bounds), or use ppo, whose Gaussian takes any")
    return None


def policy_module(name: str, spaces: EnvSpaces, actor: ActorConfig) -> nn.Module:
    """A fresh policy of algorithm ``name``: what its collectors run and ``load_policy``
    returns (greedy Q-network, squashed Gaussian or deterministic policy)."""
    if name == "dqn":
        return QNetwork(spaces.obs_shape, int(as_discrete(spaces.action_space).n), actor,
                        spaces.obs_format)
    if name in ("sac", "mpo"):
        return SquashedGaussianPolicy(spaces.obs_shape, as_box(spaces.action_space), actor,
                                      spaces.obs_format)
    return DeterministicPolicy(spaces.obs_shape, as_box(spaces.action_space), actor,
                               spaces.obs_format)


def make_policy(config: Config, spaces: EnvSpaces) -> nn.Module:
    """The policy of ``config.algo.name``, initialised from ``config.seed``."""
    with torch.random.fork_rng():
        torch.manual_seed(config.seed)
        return policy_module(config.algo.name, spaces, config.actor)


def make_offpolicy_algorithm(config: Config, spaces: EnvSpaces,
                             device: torch.device | str = "cpu") -> OffPolicyAlgorithm:
    """The off-policy algorithm named by ``config.algo.name``, its learner on ``device``."""
    problem = action_space_problem(config.algo.name, spaces, config.env.id)
    if problem:
        raise ValueError(problem)
    return OFF_POLICY_ALGORITHMS[config.algo.name](spaces, config, device)


__all__ = ["DDPG", "DQN", "MPO", "OFF_POLICY_ALGORITHMS", "OffPolicyAlgorithm", "SAC", "Segment",
           "TD3", "action_space_problem", "make_offpolicy_algorithm", "make_policy",
           "policy_module"]
