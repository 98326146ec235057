"""Off-policy algorithms (DQN, SAC, TD3, DDPG, MPO, MPC), the policies they publish, and the
plug-ins users derive from them (``algo.name: module:Class``)."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from hpcrl.core.algorithms.capabilities import ACTION_WORDS, SPACE_NAMES, action_kind
from hpcrl.core.algorithms.offpolicy.base import OffPolicyAlgorithm, Segment
from hpcrl.core.algorithms.offpolicy.dqn import DQN
from hpcrl.core.algorithms.offpolicy.mpc import MPC
from hpcrl.core.algorithms.offpolicy.mpo import MPO
from hpcrl.core.algorithms.offpolicy.sac import SAC
from hpcrl.core.algorithms.offpolicy.td3 import DDPG, TD3
from hpcrl.core.algorithms.plugin import build_algorithm, load_algorithm_class
from hpcrl.core.envs import EnvSpaces, as_box
from hpcrl.plugins import PluginError, is_import_path

if TYPE_CHECKING:  # annotations only: core does not import config at run time
    from hpcrl.config.schema import Config

OFF_POLICY_ALGORITHMS: dict[str, type[OffPolicyAlgorithm]] = {
    "dqn": DQN, "sac": SAC, "td3": TD3, "ddpg": DDPG, "mpo": MPO, "mpc": MPC}


def offpolicy_class(name: str) -> type[OffPolicyAlgorithm]:
    """The off-policy algorithm ``name``: a built-in, or a plug-in's ``module:Class`` that
    derives from :class:`OffPolicyAlgorithm` (refused with the contract it breaks)."""
    if not is_import_path(name):
        return OFF_POLICY_ALGORITHMS[name]
    cls = load_algorithm_class(name, OffPolicyAlgorithm,
                               "hpcrl.DQN, hpcrl.SAC, hpcrl.TD3, hpcrl.DDPG, hpcrl.MPO, "
                               "hpcrl.MPC "
                               "(off-policy; for an on-policy one, from hpcrl.PPO, hpcrl.A2C, "
                               "hpcrl.IMPALA or hpcrl.OnPolicyAlgorithm)", "q_loss")
    if getattr(cls, "capabilities", None) is None:
        raise PluginError(f"config key 'algo.name' ({name}): {cls.__name__} declares no "
                          f"capabilities; set the class attribute (hpcrl.Capabilities) or "
                          f"derive from a built-in, whose declaration it then inherits")
    return cls


def offpolicy_base(cls: type[OffPolicyAlgorithm]) -> str:
    """The built-in whose defaults and recipes an off-policy class runs with: the nearest
    built-in it derives from, or for a direct subclass of :class:`OffPolicyAlgorithm`,
    ``dqn`` when it acts on discrete actions, else ``sac``."""
    bases = [(n, b) for n, b in OFF_POLICY_ALGORITHMS.items() if issubclass(cls, b)]
    if bases:  # the most derived (DDPG derives from TD3)
        return max(bases, key=lambda item: len(item[1].__mro__))[0]
    return "dqn" if "discrete" in cls.capabilities.actions else "sac"


def action_space_problem(name: str, spaces: EnvSpaces, env_id: str) -> str | None:
    """Why ``algo.name`` cannot act in this env's action space (its declared
    :attr:`~OffPolicyAlgorithm.capabilities`), or None."""
    caps = offpolicy_class(name).capabilities
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


def policy_module(spaces: EnvSpaces, config: Config) -> nn.Module:
    """A fresh policy of ``config.algo.name``: what its collectors run and ``load_policy``
    returns (its class's :meth:`~OffPolicyAlgorithm.policy_for`)."""
    return offpolicy_class(config.algo.name).policy_for(spaces, config)


def make_policy(config: Config, spaces: EnvSpaces) -> nn.Module:
    """The policy of ``config.algo.name``, initialised from ``config.seed``."""
    with torch.random.fork_rng():
        torch.manual_seed(config.seed)
        return policy_module(spaces, config)


def make_offpolicy_algorithm(config: Config, spaces: EnvSpaces,
                             device: torch.device | str = "cpu") -> OffPolicyAlgorithm:
    """The off-policy algorithm named by ``config.algo.name``, its learner on ``device`` (a
    plug-in gets ``config.algo.kwargs`` as keyword arguments)."""
    name = config.algo.name
    problem = action_space_problem(name, spaces, config.env.id)
    if problem:
        raise ValueError(problem)
    return build_algorithm(offpolicy_class(name), name, (spaces, config, device),
                           config.algo.kwargs)

__all__ = ["DDPG", "DQN", "MPC", "MPO", "OFF_POLICY_ALGORITHMS",
           "OffPolicyAlgorithm", "SAC", "Segment", "TD3", "action_space_problem",
           "make_offpolicy_algorithm", "make_policy", "offpolicy_base", "offpolicy_class",
           "policy_module"]
