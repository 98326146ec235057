"""Named topologies: each is a set of scheme keys; keys a user sets explicitly win.

The presets of named architectures (IMPALA, Ape-X, asynchronous SAC) also bring the agent
that defines them (:data:`PRESET_AGENTS`): default keys of other sections, filled in under
whatever the config sets itself.
"""
from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

PRESETS: dict[str, dict[str, Any]] = {
    # one process: collector, gradient worker and updater in lock step
    "serial": {"gradient_workers": 1, "collectors_per_worker": 0, "collection": "sync",
               "gradients": "sync", "update": "decentralized"},
    # A2C/PPO with parallel synchronous collectors feeding one learner
    "a2c": {"gradient_workers": 1, "collectors_per_worker": 2, "collection": "sync",
            "gradients": "sync", "update": "decentralized"},
    # DD-PPO: every rank collects and learns, gradients all-reduced, stragglers preempted
    "ddppo": {"gradient_workers": 2, "collectors_per_worker": 0, "collection": "sync",
              "gradients": "sync", "update": "decentralized",
              "preemption": {"fraction_workers": 0.6, "fraction_samples": 0.25}},
    # A3C: gradient workers send gradients to an updater that applies them as they arrive
    "a3c": {"gradient_workers": 2, "collectors_per_worker": 0, "collection": "sync",
            "gradients": "async", "update": "central"},
    # asynchronous collection: collectors stream rollouts, the learner bounds the policy lag
    "async-ppo": {"gradient_workers": 1, "collectors_per_worker": 2, "collection": "async",
                  "gradients": "sync", "update": "decentralized", "max_policy_lag": 2},
    # IMPALA: collectors stream rollouts, the learner corrects their lag with V-trace
    "impala": {"gradient_workers": 1, "collectors_per_worker": 2, "collection": "async",
               "gradients": "sync", "update": "decentralized", "max_policy_lag": 8},
    # Ape-X: collectors with their own epsilon stream prioritised transitions into the replay
    "apex": {"gradient_workers": 1, "collectors_per_worker": 2, "collection": "async",
             "gradients": "sync", "update": "decentralized"},
    # SAC with collectors streaming transitions into the learner's replay
    "async-sac": {"gradient_workers": 1, "collectors_per_worker": 2, "collection": "async",
                  "gradients": "sync", "update": "decentralized"},
}

# the agent each named architecture stands for: defaults under the config's own keys, and
# over the algorithm's defaults (hpcrl.config.algo_defaults), which fill in the rest. The
# replay agents stream chunks of algo.num_steps steps per env: shorter than a serial run's
# progress row, so new data and new weights travel while training goes on.
PRESET_AGENTS: dict[str, dict[str, dict[str, Any]]] = {
    "impala": {"algo": {"name": "impala"}},
    "apex": {"algo": {"name": "dqn", "num_steps": 256,
                      "dqn": {"per_collector_eps": True, "initial_priorities": "collector"}},
             "replay": {"prioritized": True, "n_step": 3}},
    "async-sac": {"algo": {"name": "sac", "num_steps": 100}},
}


def apply_preset(scheme: dict[str, Any]) -> dict[str, Any]:
    """The scheme section with its preset's keys filled in under the explicit ones (a
    preset's straggler preemption is left out when one rank collects: nothing to preempt)."""
    name = scheme.get("preset", "serial")
    if name not in PRESETS:
        return scheme  # the typed loader reports the unknown preset with the choices
    base = {k: (dict(v) if isinstance(v, dict) else v) for k, v in PRESETS[name].items()}
    for key, value in scheme.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            base[key] = {**base[key], **value}
        else:
            base[key] = value
    workers, k = base.get("gradient_workers", 1), base.get("collectors_per_worker", 0)
    if ("preemption" not in scheme and "preemption" in base and isinstance(workers, int)
            and isinstance(k, int) and workers * max(k, 1) < 2):
        # one collecting rank (ddppo on one GPU): no straggler to preempt, none waited for
        base["preemption"] = {"fraction_workers": 1.0, "fraction_samples": 1.0}
    return base


def apply_preset_agent(data: dict[str, Any], kind_of: Callable[[dict[str, Any]], str | None],
                       sections: Collection[str],
                       section_of: Callable[[dict[str, Any]], str | None]) -> dict[str, Any]:
    """The whole config ``data`` with its preset's agent defaults filled in. ``kind_of``
    names the built-in the algorithm of ``data`` runs as and ``section_of`` the section its
    class reads (the config's loader knows both; None for a plug-in that cannot be
    imported), and ``sections`` are the built-ins' own sections: the agent's is left out
    when the config names another algorithm, and moved to a plug-in's own section."""
    scheme = data.get("scheme")
    name = scheme.get("preset") if isinstance(scheme, dict) else None
    agent = PRESET_AGENTS.get(name or "")
    if not agent:
        return data
    algo = data.get("algo")
    named = isinstance(algo, dict) and "name" in algo
    kind = agent["algo"]["name"]
    if named and kind_of(data) != kind:
        # the config names another algorithm: the agent's algorithm section is not its own
        agent = {**agent, "algo": {key: value for key, value in agent["algo"].items()
                                   if key not in sections}}
    elif named and kind in agent["algo"]:
        # a plug-in of the agent's algorithm that reads a section of its own takes the
        # agent's keys there (its section derives from its base's keys)
        own = section_of(data) or kind
        agent = {**agent, "algo": {own if key == kind else key: value
                                   for key, value in agent["algo"].items()}}
    return _under(agent, data)


def _under(defaults: dict[str, Any], own: dict[str, Any]) -> dict[str, Any]:
    """``own`` with ``defaults`` filled in under every key it leaves unset, section by
    section (a key ``own`` sets, or a section it sets to something else, wins)."""
    own = {key: value for key, value in own.items()
           if not (value is None and isinstance(defaults.get(key), dict))}  # an empty section
    out = {**defaults, **own}
    for key, value in defaults.items():
        if isinstance(value, dict) and isinstance(own.get(key), dict):
            out[key] = _under(value, own[key])
    return out
