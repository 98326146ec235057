"""Who plays a multi-agent game's agents (``env.agents``): every agent the one trained policy
(``shared``), or the trained policy one seat a match against a league (``league``), and
what follows from it: whether a run keeps a league, how many env slots a game takes, and
the line ``hpcrl plan`` prints.

``env.agents: auto`` is decided by the game's API: turn-based (PettingZoo's AEC, OpenSpiel)
plays the league, simultaneous (Parallel) shares the policy. Each game is made once to
ask (its API and its agents), then remembered.
"""
from __future__ import annotations

import functools
from typing import Any

from hpcrl.envs.multiagent.aec import is_aec
from hpcrl.envs.multiagent.named_envs import make_pettingzoo
from hpcrl.sections.schema import EnvConfig

SHARED, LEAGUE = "shared", "league"  # env.agents, resolved
_MULTIAGENT_PREFIXES = ("pettingzoo.", "openspiel:")


def is_multiagent(config: EnvConfig) -> bool:
    """Whether ``env.id`` names a multi-agent game (``env.multiagent``, or an id of
    PettingZoo's modules or OpenSpiel's games)."""
    return config.multiagent or config.id.startswith(_MULTIAGENT_PREFIXES)


def agents_mode(config: EnvConfig) -> str:
    """Who plays a multi-agent game's agents (``env.agents``, ``auto`` resolved): ``shared``
    (every agent acts with the trained policy and trains it) or ``league`` (self-play, one
    seat per match). ``auto`` is ``league`` for a turn-based game (PettingZoo's AEC API,
    OpenSpiel) and ``shared`` for a Parallel one."""
    if config.agents != "auto":
        return config.agents
    return LEAGUE if turn_based(config) else SHARED


def turn_based(config: EnvConfig) -> bool:
    """Whether the game of ``env.id`` is turn-based (PettingZoo's AEC API, OpenSpiel)."""
    return _game_facts(config.id, tuple(sorted(config.kwargs.items())))[0]


def plays_league(config: EnvConfig) -> bool:
    """Whether ``env.id`` is a multi-agent game trained by self-play against a league
    (``env.agents`` resolves to ``league``): its runs keep snapshots, matches and ratings."""
    return is_multiagent(config) and agents_mode(config) == LEAGUE


def slots_per_game(config: EnvConfig) -> int:
    """The env slots one game takes: its agents under ``env.agents=shared`` (every agent a
    slot), else 1. A collector's slots, and each of its env groups', hold whole games."""
    if not is_multiagent(config) or agents_mode(config) != SHARED:
        return 1
    return _game_facts(config.id, tuple(sorted(config.kwargs.items())))[1]


@functools.lru_cache(maxsize=16)
def _game_facts(game: str, kwargs: tuple[tuple[str, Any], ...]) -> tuple[bool, int]:
    """Whether game ``game`` made with ``kwargs`` is turn-based, and its agents (asked once
    per game: making one costs)."""
    env = make_pettingzoo(game, **dict(kwargs))
    try:
        return is_aec(env), len(env.possible_agents)
    finally:
        env.close()


def agents_summary(config: EnvConfig) -> str | None:
    """How a multi-agent ``env.id`` is played, for ``hpcrl plan`` (None for one agent): who
    plays the agents, and what ``env.num_envs`` counts."""
    if not is_multiagent(config):
        return None
    agents = _game_facts(config.id, tuple(sorted(config.kwargs.items())))[1]
    if agents_mode(config) == SHARED:
        return (f"{config.id}: its {agents} agents share the trained policy, every agent's "
                f"steps train it (env.agents=shared); each env is one agent, "
                f"{config.num_envs // agents} games of {agents} per collecting rank")
    league = config.league
    every = (f"a snapshot every {league.snapshot_every:,} env steps"
             if league.snapshot_every else "no periodic snapshots")
    return (f"{config.id}: self-play (env.agents=league), the trained policy takes one of "
            f"{agents} seats a match, the league the others ({league.opponents} over its "
            f"snapshots, {every}); evaluations play {league.eval_opponent}")
