"""Per-algorithm defaults: the standard value of every key whose good value depends on the
algorithm, filled in under whatever the config sets itself.

The dataclass defaults of :mod:`hpcrl.config.schema` are PPO's (RL-zoo's CartPole recipe,
the embedded default). Any other algorithm would inherit them for the keys every algorithm
reads (learning rate and its schedule, gamma, rollout length, network...), and PPO's values
are wrong there: SAC with a learning rate decayed to zero and gamma 0.98 does not learn.
So once the config's ``algo.name`` is known (after a scheme preset's agent, which may name
it), :func:`fill_algo_defaults` fills in :data:`ALGO_DEFAULTS` ``[name]`` under every key the
user gave in YAML or ``--set``; a key the user sets always wins.

The table holds, for each algorithm:

- :data:`SHARED_KEYS`, read by every algorithm (so every algorithm names its own value);
- ``algo.ent_coef`` and ``algo.vf_coef`` (PPO, A2C, IMPALA), ``algo.gae_lambda`` and
  ``algo.normalize_advantage`` (PPO, A2C);
- :data:`REPLAY_KEYS` for the replay agents (DQN, SAC, TD3, DDPG, MPO, MPC).

A key read by one algorithm only (PPO's clip range, TD3's policy delay, SAC's temperature)
lives in that algorithm's section (:mod:`hpcrl.config.algo_sections`), whose field default
is that algorithm's standard value.

Sources: Stable-Baselines3 2.x defaults (SAC, TD3, DDPG, A2C), with RL-zoo's Gaussian
exploration noise 0.1 for TD3/DDPG; DQN takes RL-zoo's CartPole recipe with 3-step returns
and a decaying learning rate (SB3's DQN defaults are Atari's: a target update every 10k
steps learns nothing on CartPole in 50k steps); IMPALA keeps the values its tests train
CartPole with.
"""
from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from hpcrl.plugins import PluginError, is_import_path

SHARED_KEYS = ("env.num_envs", "actor.hidden_sizes", "actor.activation", "actor.ortho_init",
               "algo.num_steps", "algo.gamma", "algo.lr", "algo.lr_schedule",
               "algo.max_grad_norm", "algo.optimizer", "algo.optimizer_eps")
ACTOR_CRITIC_KEYS = ("algo.ent_coef", "algo.vf_coef")
ADVANTAGE_KEYS = ("algo.gae_lambda", "algo.normalize_advantage")
REPLAY_KEYS = ("replay.buffer_size", "replay.batch_size", "replay.learning_starts",
               "replay.train_freq", "replay.gradient_steps", "replay.tau",
               "replay.target_update_interval", "replay.n_step")

_SB3_REPLAY = {"replay.buffer_size": 1_000_000, "replay.batch_size": 256,
               "replay.learning_starts": 100, "replay.train_freq": 1,
               "replay.gradient_steps": 1, "replay.tau": 0.005,
               "replay.target_update_interval": 1, "replay.n_step": 1}
# continuous control (SB3): one env, a progress row every 1000 steps, Adam without clipping
_CONTINUOUS = {"env.num_envs": 1, "actor.activation": "relu", "actor.ortho_init": False,
               "algo.num_steps": 1000, "algo.gamma": 0.99, "algo.lr_schedule": "constant",
               "algo.max_grad_norm": 0.0, "algo.optimizer": "adam", "algo.optimizer_eps": 1e-8,
               **_SB3_REPLAY}

ALGO_DEFAULTS: dict[str, dict[str, Any]] = {
    # RL-zoo's CartPole PPO: the schema's own defaults, listed so the table is complete
    "ppo": {"env.num_envs": 8, "actor.hidden_sizes": [64, 64], "actor.activation": "tanh",
            "actor.ortho_init": True, "algo.num_steps": 32, "algo.gamma": 0.98,
            "algo.lr": 1e-3, "algo.lr_schedule": "linear", "algo.max_grad_norm": 0.5,
            "algo.optimizer": "adam", "algo.optimizer_eps": 1e-5, "algo.ent_coef": 0.0,
            "algo.vf_coef": 0.5, "algo.gae_lambda": 0.8, "algo.normalize_advantage": True},
    # SB3's A2C (RMSprop, 5-step rollouts, Monte-Carlo advantages), RL-zoo's 8 envs
    "a2c": {"env.num_envs": 8, "actor.hidden_sizes": [64, 64], "actor.activation": "tanh",
            "actor.ortho_init": True, "algo.num_steps": 5, "algo.gamma": 0.99,
            "algo.lr": 7e-4, "algo.lr_schedule": "constant", "algo.max_grad_norm": 0.5,
            "algo.optimizer": "rmsprop", "algo.optimizer_eps": 1e-5, "algo.ent_coef": 0.0,
            "algo.vf_coef": 0.5, "algo.gae_lambda": 1.0, "algo.normalize_advantage": False},
    # V-trace actor-critic: the values the impala preset's CartPole test learns with
    "impala": {"env.num_envs": 8, "actor.hidden_sizes": [64, 64], "actor.activation": "tanh",
               "actor.ortho_init": True, "algo.num_steps": 32, "algo.gamma": 0.98,
               "algo.lr": 1e-3, "algo.lr_schedule": "linear", "algo.max_grad_norm": 0.5,
               "algo.optimizer": "adam", "algo.optimizer_eps": 1e-5, "algo.ent_coef": 0.0,
               "algo.vf_coef": 0.5},
    # RL-zoo's CartPole DQN with 3-step returns and a linearly decaying learning rate
    "dqn": {"env.num_envs": 1, "actor.hidden_sizes": [256, 256], "actor.activation": "relu",
            "actor.ortho_init": False, "algo.num_steps": 1024, "algo.gamma": 0.99,
            "algo.lr": 2.3e-3, "algo.lr_schedule": "linear", "algo.max_grad_norm": 10.0,
            "algo.optimizer": "adam", "algo.optimizer_eps": 1e-8,
            "replay.buffer_size": 100_000, "replay.batch_size": 64,
            "replay.learning_starts": 1000, "replay.train_freq": 256,
            "replay.gradient_steps": 128, "replay.tau": 1.0,
            "replay.target_update_interval": 128, "replay.n_step": 3},
    # SB3's SAC: lr 3e-4, net [256, 256], automatic temperature
    "sac": {**_CONTINUOUS, "actor.hidden_sizes": [256, 256], "algo.lr": 3e-4},
    # SB3's TD3 and DDPG: lr 1e-3, net [400, 300]
    "td3": {**_CONTINUOUS, "actor.hidden_sizes": [400, 300], "algo.lr": 1e-3},
    "ddpg": {**_CONTINUOUS, "actor.hidden_sizes": [400, 300], "algo.lr": 1e-3},
    # MPO: SAC's network and rhythm (Acme's MPO also takes lr 3e-4 with 256-wide nets)
    "mpo": {**_CONTINUOUS, "actor.hidden_sizes": [256, 256], "algo.lr": 3e-4},
    # MPC: the world model's network and rhythm (model-based agents train their model
    # several steps per env step); undiscounted planning, as PETS
    "mpc": {**_CONTINUOUS, "actor.hidden_sizes": [64, 64], "actor.activation": "relu",
            "algo.lr": 1e-3, "algo.gamma": 1.0, "replay.learning_starts": 200,
            "replay.gradient_steps": 4},
}


def _has(data: Mapping[str, Any], key: str) -> bool:
    node: Any = data
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False
        node = node[part]
    return True


def algorithm_kind_of(data: Mapping[str, Any]) -> str | None:
    """The built-in whose defaults and section the config ``data`` runs with (PPO when
    ``algo.name`` is unset; None for a plug-in that cannot be imported)."""
    algo = data.get("algo")
    name = algo.get("name", "ppo") if isinstance(algo, Mapping) else "ppo"
    return builtin_kind(name) if isinstance(name, str) else None


def algorithm_type_of(name: str) -> Any:
    """The class of ``algo.name`` in core's registry, built in or a plug-in; None for an
    unknown name or a plug-in that cannot be imported (the config check reports it).
    Asked when a config is loaded (its own section, its saved form), never when config's
    data is imported."""
    from hpcrl.core.algorithms import algorithm_type

    try:
        return algorithm_type(name)
    except (PluginError, KeyError):
        return None


def section_name_of(data: Mapping[str, Any]) -> str | None:
    """The name of the own section (``algo.<name>``) that the algorithm of config ``data``
    reads, as its class declares (a plug-in may name a section of its own); None for one
    that cannot be imported (the config check reports it)."""
    algo = data.get("algo")
    name = algo.get("name", "ppo") if isinstance(algo, Mapping) else "ppo"
    cls = algorithm_type_of(name) if isinstance(name, str) else None
    return None if cls is None else str(cls.section_name())


def builtin_kind(name: str) -> str | None:
    """The built-in whose defaults and section ``algo.name`` takes: a plug-in takes its
    base's (None for one that cannot be imported, left for the config check to report)."""
    if not is_import_path(name):
        return name
    # a plug-in's base is its class's (core's registry): imported for a plug-in only, so
    # that importing config's data stays light
    from hpcrl.core.algorithms import algorithm_kind

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
    kind = algorithm_kind_of(out)
    defaults = ALGO_DEFAULTS.get(kind) if kind is not None else None
    if not defaults:
        return out, []
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
