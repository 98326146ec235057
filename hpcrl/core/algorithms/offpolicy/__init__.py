"""Off-policy algorithms (DQN, SAC, TD3, DDPG, MPO) and the policies they publish."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from hpcrl.core.algorithms.capabilities import ACTION_WORDS, SPACE_NAMES, action_kind
from hpcrl.core.algorithms.offpolicy.base import OffPolicyAlgorithm, Segment
from hpcrl.core.algorithms.offpolicy.dqn import DQN
from hpcrl.core.algorithms.offpolicy.mpo import MPO
from hpcrl.core.algorithms.offpolicy.sac import SAC
from hpcrl.core.algorithms.offpolicy.td3 import DDPG, TD3
from hpcrl.core.envs import EnvSpaces, as_box

if TYPE_CHECKING:  # annotations only: core does not import config at run time
    from hpcrl.config.schema import ActorConfig, Config

OFF_POLICY_ALGORITHMS: dict[str, type[OffPolicyAlgorithm]] = {
    "dqn": DQN, "sac": SAC, "td3": TD3, "ddpg": DDPG, "mpo": MPO}


def action_space_problem(name: str, spaces: EnvSpaces, env_id: str) -> str | None:
    """Why ``algo.name`` cannot act in this env's action space (its declared
    :attr:`~OffPolicyAlgorithm.capabilities`), or None."""
    caps = OFF_POLICY_ALGORITHMS[name].capabilities
    space, kind = spaces.action_space, action_kind(spaces.action_space)
    if kind not in caps.actions:
        wanted = " or ".join(SPACE_NAMES[k] for k in caps.actions)
        others = [n for n, c in OFF_POLICY_ALGORITHMS.items() if kind in c.capabilities.actions]
        fix = (f"use {_listed(others)} for {ACTION_WORDS[kind]} actions" if others
               else "use ppo, which acts in any action space")
        return (f"config key 'algo.name': {name} needs a {wanted} action space but env "
                f"'{env_id}' has {space}; {fix}")
    if caps.bounded_actions and not (np.all(np.isfinite(as_box(space).low))
                                     and np.all(np.isfinite(as_box(space).high))):
        return (f"config key 'algo.name': {name} squashes its actions into the action "
                f"space's [low, high], and env '{env_id}' has unbounded actions {space}; "
                f"bound them with a wrapper (env.wrappers: gymnasium.wrappers:ClipAction "
                f"after one that sets the bounds), or use ppo, whose Gaussian takes any")
    return None


def _listed(names: list[str]) -> str:
    """``a, b or c``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def policy_module(name: str, spaces: EnvSpaces, actor: ActorConfig) -> nn.Module:
    """A fresh policy of algorithm ``name``: what its collectors run and ``load_policy``
    returns (its class's :meth:`~OffPolicyAlgorithm.acting_policy`)."""
    return OFF_POLICY_ALGORITHMS[name].acting_policy(spaces, actor)


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
