"""Checks of the ``policies`` section (the trained policies of a league job), made before
any rank starts: names, roles, ranks and the keys each may set. Each policy's own config is
checked whole when it is made (:func:`~hpcrl.config.policy_configs.policy_configs`)."""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from hpcrl.envs.multiagent.play_modes import is_multiagent, plays_league
from hpcrl.sections.schema import Config

ROLES = ("main", "main_exploiter", "league_exploiter")
ENTRY_KEYS = ("role", "ranks", "set")
_NAME = re.compile(r"[A-Za-z0-9_.]+")
RESERVED_NAMES = ("random", "latest")  # names of eval opponents (env.league.eval_opponent)
# keys a policy may not set for itself: the game, the seeds and the job's own sections
FIXED_PREFIXES = ("seed", "env.id", "env.kwargs", "env.agents", "env.multiagent",
                  "env.wrappers", "env.league.player", "env.league.frozen", "policies", "pbt")


def entry(config: Config, name: str) -> Mapping[str, Any]:
    """The ``policies`` entry of ``name`` (an empty one for ``{name: null}``)."""
    value = config.policies[name]
    return value if isinstance(value, Mapping) else {}


def role_of(config: Config, name: str) -> str:
    """The role of policy ``name`` (``main`` unless its entry says)."""
    return str(entry(config, name).get("role", "main"))


def check_policies(c: Config) -> list[str]:
    """The ``policies`` section's problems, each naming the key and its fix."""
    if not c.policies:
        return []
    problems = []
    if not (is_multiagent(c.env) and plays_league(c.env)):
        problems.append(f"config section 'policies' names the trained policies of a self-play "
                        f"league; env.id {c.env.id} is not played by a league (a turn-based "
                        f"multi-agent game, env.agents=league): drop the section (several "
                        f"policies mapped to the agents of one cooperative game are not "
                        f"built yet)")
    if c.pbt.mutate:
        problems.append("config sections 'policies' and 'pbt': a population of league jobs "
                        "is not built; drop one of them")
    frozen = set(c.env.league.frozen)
    for name, value in c.policies.items():
        key = f"policies.{name}"
        if not isinstance(name, str) or not _NAME.fullmatch(name) or name in RESERVED_NAMES:
            problems.append(f"config key '{key}': a policy's name uses letters, digits, '_' "
                            f"and '.', and is not {' or '.join(RESERVED_NAMES)}")
        if name in frozen:
            problems.append(f"config key '{key}': env.league.frozen already names a policy "
                            f"'{name}'; rename one of them")
        if value is not None and not isinstance(value, Mapping):
            problems.append(f"config key '{key}' is a mapping of {', '.join(ENTRY_KEYS)} "
                            f"(or {{}}), got {value!r}")
            continue
        problems += _entry_problems(key, value or {})
    known = set(c.policies) | frozen
    for name in c.policies:
        versus = (entry(c, name).get("set", {}) or {}).get("env.league.versus", [])
        unknown_versus = [v for v in versus or [] if v not in known]
        if unknown_versus:
            problems.append(f"config key 'policies.{name}.set.env.league.versus' names "
                            f"{unknown_versus}, neither a policy of the job nor a frozen one: "
                            f"use {sorted(known)}")
    roles = [role_of(c, name) for name in c.policies]
    if "main" not in roles and all(r in ROLES for r in roles):
        problems.append("config section 'policies' has no policy of role 'main': the "
                        "exploiters exploit the mains (give one policy role: main)")
    return problems


def _entry_problems(key: str, value: Mapping[str, Any]) -> list[str]:
    """One entry's problems: unknown keys, role, ranks and the keys it sets."""
    problems = []
    unknown = sorted(set(value) - set(ENTRY_KEYS))
    if unknown:
        problems.append(f"config key '{key}' has unknown keys {unknown}: a policy takes "
                        f"{', '.join(ENTRY_KEYS)}")
    role = value.get("role", "main")
    if role not in ROLES:
        problems.append(f"config key '{key}.role' ({role!r}): one of {', '.join(ROLES)}")
    ranks = value.get("ranks")
    if ranks is not None and (isinstance(ranks, bool) or not isinstance(ranks, int)
                              or ranks < 1):
        problems.append(f"config key '{key}.ranks' ({ranks!r}): a whole number of MPI ranks, "
                        f"at least 1 (or leave it out: the launch's ranks split evenly)")
    sets = value.get("set", {}) or {}
    if not isinstance(sets, Mapping):
        problems.append(f"config key '{key}.set' is a mapping of dotted config keys to "
                        f"values, e.g. {{algo.lr: 0.001}}; got {sets!r}")
        return problems
    for dotted in sets:
        if str(dotted).startswith(FIXED_PREFIXES):
            problems.append(f"config key '{key}.set.{dotted}': every policy plays the same "
                            f"game with the job's seeds and league; set it for the whole "
                            f"config instead")
    return problems
