"""Per-algorithm defaults: the standard value of every key whose good value depends on the
algorithm, filled in under whatever the config sets itself.

The dataclass defaults of :mod:`hpcrl.sections.schema` are PPO's (RL-zoo's CartPole recipe,
the embedded default). Any other algorithm would inherit them for the keys every algorithm
reads (learning rate and its schedule, gamma, rollout length, network...), and PPO's values
are wrong there: SAC with a learning rate decayed to zero and gamma 0.98 does not learn.
So once the config's ``algo.name`` is known (after a scheme preset's agent, which may name
it), :func:`fill_algo_defaults` fills in the ``defaults`` its class declares
(:attr:`hpcrl.Algorithm.defaults`; a plug-in takes those of the built-in it runs as) under
every key the user gave in YAML or ``--set``; a key the user sets always wins.

Each built-in's ``defaults`` hold:

- :data:`SHARED_KEYS`, read by every algorithm (so every algorithm names its own value);
- ``algo.ent_coef`` and ``algo.vf_coef`` (PPO, A2C, IMPALA), ``algo.gae_lambda`` and
  ``algo.normalize_advantage`` (PPO, A2C);
- :data:`REPLAY_KEYS` for the replay agents (DQN, SAC, TD3, DDPG, MPO, MPC).

A key read by one algorithm only (PPO's clip range, TD3's policy delay, SAC's temperature)
lives in that algorithm's section (:mod:`hpcrl.sections.algorithm_keys`), whose field default
is that algorithm's standard value.

Sources: Stable-Baselines3 2.x defaults (SAC, TD3, DDPG, A2C), with RL-zoo's Gaussian
exploration noise 0.1 for TD3/DDPG; DQN takes RL-zoo's CartPole recipe with 3-step returns
and a decaying learning rate (SB3's DQN defaults are Atari's: a target update every 10k
steps learns nothing on CartPole in 50k steps); IMPALA keeps the values its tests train
CartPole with.

The algorithms' classes live in core, which imports torch: this module asks core's registry
for their declarations when a config is loaded (:func:`algorithm_type_of`,
:func:`builtin_sections`), never when the loader is imported.
"""
from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from hpcrl.components.import_paths import PluginError, is_import_path

SHARED_KEYS = ("env.num_envs", "actor.hidden_sizes", "actor.activation", "actor.ortho_init",
               "algo.num_steps", "algo.gamma", "algo.lr", "algo.lr_schedule",
               "algo.max_grad_norm", "algo.optimizer", "algo.optimizer_eps")
ACTOR_CRITIC_KEYS = ("algo.ent_coef", "algo.vf_coef")
ADVANTAGE_KEYS = ("algo.gae_lambda", "algo.normalize_advantage")
REPLAY_KEYS = ("replay.buffer_size", "replay.batch_size", "replay.learning_starts",
               "replay.train_freq", "replay.gradient_steps", "replay.tau",
               "replay.target_update_interval", "replay.n_step")


def builtin_sections() -> dict[str, type]:
    """The built-ins' own sections, ``algo.<name>`` -> the dataclass of its keys, as their
    classes declare them (core's registry)."""
    from hpcrl.algorithms import builtin_sections as declared

    return declared()


def _defaults_of(name: str) -> Mapping[str, Any]:
    """The defaults ``algo.name`` runs with, as its class declares them; none for an
    unknown name or a plug-in that cannot be imported (the config check reports it)."""
    from hpcrl.algorithms import algorithm_defaults

    try:
        return algorithm_defaults(name)
    except (PluginError, KeyError):
        return {}


def _has(data: Mapping[str, Any], key: str) -> bool:
    node: Any = data
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False
        node = node[part]
    return True


def name_of(data: Mapping[str, Any]) -> Any:
    """The ``algo.name`` of the config ``data``: ``ppo`` when unset (any other value, of
    whatever type, as given: the typed loader reports a wrong one)."""
    algo = data.get("algo")
    return algo.get("name", "ppo") if isinstance(algo, Mapping) else "ppo"


def algorithm_kind_of(data: Mapping[str, Any]) -> str | None:
    """The built-in whose defaults and section the config ``data`` runs with (PPO when
    ``algo.name`` is unset; None for a plug-in that cannot be imported)."""
    name = name_of(data)
    return builtin_kind(name) if isinstance(name, str) else None


def algorithm_type_of(name: str) -> Any:
    """The class of ``algo.name`` in core's registry, built in or a plug-in; None for an
    unknown name or a plug-in that cannot be imported (the config check reports it)."""
    from hpcrl.algorithms import algorithm_type

    try:
        return algorithm_type(name)
    except (PluginError, KeyError):
        return None


def section_name_of(data: Mapping[str, Any]) -> str | None:
    """The name of the own section (``algo.<name>``) that the algorithm of config ``data``
    reads, as its class declares (a plug-in may name a section of its own); None for one
    that cannot be imported (the config check reports it)."""
    name = name_of(data)
    cls = algorithm_type_of(name) if isinstance(name, str) else None
    return None if cls is None else str(cls.section_name())


def builtin_kind(name: str) -> str | None:
    """The built-in whose defaults and section ``algo.name`` takes: a plug-in takes its
    base's (None for one that cannot be imported, left for the config check to report)."""
    if not is_import_path(name):
        return name
    # a plug-in's base is its class's (core's registry): imported for a plug-in only, so
    # that importing the loader stays light
    from hpcrl.algorithms import algorithm_kind

    try:
        return algorithm_kind(name)
    except PluginError:
        return None


def fill_algo_defaults(data: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``data`` with its algorithm's defaults filled in under the keys it sets, and the
    dotted keys that were filled (``hpcrl config show`` marks them).

    The algorithm is ``data['algo']['name']`` (PPO when unset). An unknown name, or a
    section that is not a mapping, is left for the typed loader to report.
    """
    out = dict(data)
    name = name_of(out)
    defaults = _defaults_of(name) if isinstance(name, str) else {}
    filled: list[str] = []
    for key, value in defaults.items():
        if _has(out, key):
            continue
        section, leaf = key.split(".", 1)
        own = out.get(section, {})
        if not isinstance(own, Mapping):
            continue
        out[section] = {**own, leaf: copy.deepcopy(value)}
        filled.append(key)
    return out, filled
