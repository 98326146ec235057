"""The one registry of algorithms and the one constructor, for both families.

:data:`ALGORITHMS` maps every built-in name to its class; :func:`algorithm_type` resolves
any ``algo.name``, a built-in or a plug-in's ``module:Class`` of either family, by the same
checks (the family's own terms are asked of its base: :meth:`plugin_problem`); and
:func:`make_algorithm` builds every algorithm alike, as
``Class(spaces, settings, device, reducer, **algo.kwargs)``, ``settings`` the parts of the
config it reads (:func:`algorithm_settings`). Adding a built-in is its module
and one line in :data:`ALGORITHMS`; what differs between algorithms is declared on the
class (:class:`~hpcrl.algorithms.algorithm.Algorithm`: its section and the keys in it,
its defaults, its range rules), never branched on here, and the config reads those
declarations through this registry (:func:`builtin_sections`, :func:`algorithm_defaults`).
"""
from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import fields, replace
from typing import Any

import numpy as np
import torch
from torch import nn

from hpcrl.algorithms.a2c.advantage_actor_critic import A2C
from hpcrl.algorithms.algorithm import CONSTRUCTOR, Algorithm, AlgorithmSettings
from hpcrl.algorithms.capabilities import (
    ACTION_WORDS,
    SPACE_NAMES,
    Capabilities,
    action_kind,
)
from hpcrl.algorithms.dqn.q_learning import DQN
from hpcrl.algorithms.impala.vtrace_learner import IMPALA
from hpcrl.algorithms.mpc.model_predictive import MPC
from hpcrl.algorithms.mpo.maximum_a_posteriori import MPO
from hpcrl.algorithms.off_policy import OffPolicyAlgorithm
from hpcrl.algorithms.on_policy import OnPolicyAlgorithm
from hpcrl.algorithms.plugin import build_algorithm, load_algorithm_class
from hpcrl.algorithms.ppo.clipped_surrogate import PPO
from hpcrl.algorithms.sac.soft_actor_critic import SAC
from hpcrl.algorithms.td3.twin_delayed import DDPG, TD3
from hpcrl.components.import_paths import CONTRACTS, PluginError, check_kwargs, is_import_path
from hpcrl.envs.vector import EnvSpaces, as_box
from hpcrl.numerics.reducer import Reducer
from hpcrl.sections.schema import AlgoConfig, Config

#: Every built-in algorithm, of both families, by its ``algo.name``: one line each.
ALGORITHMS: dict[str, type[Algorithm]] = {
    "ppo": PPO, "a2c": A2C, "impala": IMPALA,
    "dqn": DQN, "sac": SAC, "td3": TD3, "ddpg": DDPG, "mpo": MPO, "mpc": MPC}
#: every name algo.name takes as it is
BUILT_IN_ALGOS = tuple(ALGORITHMS)
# what an algorithm's settings hold, for the refusal of a constructor of before
SETTINGS_FIELDS = ", ".join(f"settings.{f.name}" for f in fields(AlgorithmSettings))
# the bases a plug-in derives from, for the refusal of one that derives from none
_DERIVE_FROM = ("hpcrl.PPO, hpcrl.A2C, hpcrl.IMPALA or hpcrl.OnPolicyAlgorithm (on-policy; "
                "for an off-policy one, from hpcrl.DQN, hpcrl.SAC, hpcrl.TD3, hpcrl.DDPG, "
                "hpcrl.MPO or hpcrl.OffPolicyAlgorithm)")


def algorithm_type(name: str) -> type[Algorithm]:
    """The class of ``algo.name``, of either family: a built-in, or a plug-in's
    ``module:Class``, a concrete subclass of one family's base that meets its contract
    (each breach a :class:`~hpcrl.components.import_paths.PluginError` naming the fix)."""
    if not is_import_path(name):
        return ALGORITHMS[name]
    cls = load_algorithm_class(name, (OnPolicyAlgorithm, OffPolicyAlgorithm), _DERIVE_FROM)
    problem = cls.plugin_problem() or _constructor_problem(cls)
    if problem:
        raise PluginError(f"config key 'algo.name' ({name}): {problem}")
    return cls


def _constructor_problem(cls: type[Algorithm]) -> str | None:
    """Why ``cls.__init__`` cannot be called the way hpcrl builds every algorithm (a
    plug-in written for the constructors of before: ``(actor, config, reducer,
    on_nonfinite)`` on-policy, ``(spaces, config, device)`` off-policy, ``(spaces, config,
    device, reducer)`` both, given the whole config), or None."""
    try:
        params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return None
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY,
                                                        p.POSITIONAL_OR_KEYWORD)]
    if positional[:len(cls.constructor_args)] == list(cls.constructor_args):
        return None
    return (f"{cls.__name__}.__init__{inspect.signature(cls.__init__)} does not take hpcrl's "
            f"arguments; every algorithm is built as {CONSTRUCTOR}: write "
            f"__init__(self, spaces, settings, device='cpu', reducer=None, *, <your keyword "
            f"arguments>) and call super().__init__(spaces, settings, device, reducer) (the "
            f"actor-critic is self.actor, the shared algo.* keys self.algo, the algorithm's "
            f"own section self.own, the actor's section self.settings.actor, and settings "
            f"holds the parts of the config an algorithm reads: {SETTINGS_FIELDS}; "
            f"{CONTRACTS})")


def algorithm_class(name: str) -> type[OnPolicyAlgorithm]:
    """The on-policy algorithm ``name`` (:func:`algorithm_type`, for the callers that need
    the on-policy family's own methods: its storage and its minibatches)."""
    cls = algorithm_type(name)
    assert issubclass(cls, OnPolicyAlgorithm), f"{name} is not an on-policy algorithm"
    return cls


def algorithm_kind(name: str) -> str:
    """The built-in that ``name`` runs as: its class's declared
    :meth:`~hpcrl.algorithms.algorithm.Algorithm.runs_as` (a plug-in inherits its
    base's; a direct subclass of a family's base takes the family's default)."""
    return algorithm_type(name).runs_as()


def algorithm_capabilities(name: str) -> Capabilities:
    """What ``algo.name`` declares it learns from and supports: its class's
    :class:`~hpcrl.algorithms.capabilities.Capabilities` (an on-policy class's
    ``storage`` attribute decides its storage)."""
    cls = algorithm_type(name)
    caps = cls.capabilities
    storage = getattr(cls, "storage", caps.storage)
    return caps if caps.storage == storage else replace(caps, storage=storage)


def builtin_sections() -> dict[str, type]:
    """The built-ins' own config sections, ``algo.<name>`` -> the dataclass of its keys, as
    their classes declare them (``section``, ``section_keys``); A2C has none."""
    return {cls.section_name(): cls.section_keys for cls in ALGORITHMS.values()
            if cls.section_keys is not None}


def algorithm_defaults(name: str) -> Mapping[str, Any]:
    """The standard values ``algo.name`` runs with (the ``defaults`` its built-in declares:
    a plug-in takes those of the built-in it runs as)."""
    return ALGORITHMS[algorithm_kind(name)].defaults


def algorithms_with(test: Callable[[Capabilities], bool]) -> tuple[str, ...]:
    """The built-in algorithms whose capabilities pass ``test``: the choices a refusal names."""
    return tuple(n for n in ALGORITHMS if test(algorithm_capabilities(n)))


def check_algorithm_kwargs(config: AlgoConfig) -> None:
    """Refuse ``algo.kwargs`` that the algorithm's constructor does not take."""
    if not config.kwargs:
        return
    if not is_import_path(config.name):
        raise PluginError(f"config key 'algo.kwargs' is for plug-in algorithms (algo.name="
                          f"'module:Class'); {config.name} reads its own algo.* keys")
    cls = algorithm_type(config.name)  # self and hpcrl's arguments come first
    check_kwargs(cls.__init__, config.kwargs, "algo.kwargs", config.name,
                 fixed=1 + len(cls.constructor_args))


def action_space_problem(name: str, spaces: EnvSpaces, env_id: str) -> str | None:
    """Why ``algo.name`` cannot act in this env's action space (its declared
    :attr:`~hpcrl.algorithms.capabilities.Capabilities.actions`), or None."""
    caps = algorithm_capabilities(name)
    space, kind = spaces.action_space, action_kind(spaces.action_space)
    if kind not in caps.actions:
        wanted = " or ".join(SPACE_NAMES[k] for k in caps.actions)
        others = list(algorithms_with(lambda c: c.replay and kind in c.actions))
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


def algorithm_settings(config: Config) -> AlgorithmSettings:
    """What the algorithm ``config.algo.name`` is built from: the sections of ``config`` it
    reads, its own section (``algo.<section>`` of its class) among them. The one place an
    algorithm's part of the config is cut out of the whole."""
    algo = config.algo
    return AlgorithmSettings(
        algo=algo, own=getattr(algo, algorithm_type(algo.name).section_name(), None),
        actor=config.actor, env=config.env, rnd=config.rnd, replay=config.replay,
        seed=config.seed, on_nonfinite=config.train.on_nonfinite)


def make_policy(config: Config, spaces: EnvSpaces) -> nn.Module:
    """A fresh acting policy of ``config.algo.name`` over ``spaces``, initialised from
    ``config.seed``: what its collectors run and ``load_policy`` returns (its class's
    :meth:`~hpcrl.algorithms.algorithm.Algorithm.policy_for`)."""
    return algorithm_type(config.algo.name).policy_for(spaces, algorithm_settings(config))


def make_algorithm(config: Config, spaces: EnvSpaces, device: torch.device | str = "cpu",
                   reducer: Reducer | None = None) -> Algorithm:
    """The algorithm named by ``config.algo.name``, of either family, built as
    :data:`~hpcrl.algorithms.algorithm.CONSTRUCTOR`: its networks on ``device``,
    ``reducer`` carrying its minibatch statistics across gradient ranks (None: this process
    alone), a plug-in's ``algo.kwargs`` as keyword arguments. An env whose action space
    the algorithm cannot act in is refused first (ValueError)."""
    name = config.algo.name
    problem = action_space_problem(name, spaces, config.env.id)
    if problem:
        raise ValueError(problem)
    return build_algorithm(algorithm_type(name), name,
                           (spaces, algorithm_settings(config), device, reducer),
                           config.algo.kwargs)
