"""Checks of self-play on a multi-agent game (a multi-agent ``env.id``) and of
``actor.action_mask``, made before any rank starts."""
from __future__ import annotations

import gymnasium as gym

from hpcrl.algorithms import algorithm_type
from hpcrl.envs.multiagent.named_envs import MultiAgentEnvError, make_pettingzoo
from hpcrl.envs.multiagent.play_modes import (
    SHARED,
    agents_mode,
    is_multiagent,
    slots_per_game,
    turn_based,
)
from hpcrl.sections.schema import Config, EnvConfig


def check_league(c: Config) -> list[str]:
    """The league's numbers in range; the trained policy honours the game's legal moves
    (``actor.action_mask`` on an actor-critic), and a masked actor sees its masks as they
    are (no observation normalisation)."""
    problems = []
    league = c.env.league
    if not 0.0 <= league.latest_fraction <= 1.0:
        problems.append(f"config key 'env.league.latest_fraction' must be in [0, 1], got "
                        f"{league.latest_fraction}")
    if not 0.0 <= league.reset_fraction <= 1.0:
        problems.append(f"config key 'env.league.reset_fraction' is a probability, in [0, 1], "
                        f"got {league.reset_fraction}")
    if not 0.0 <= league.win_threshold <= 1.0:
        problems.append(f"config key 'env.league.win_threshold' must be in [0, 1] (0: off), got "
                        f"{league.win_threshold}")
    if league.snapshot_every < 0 or league.threshold_matches < 1:
        problems.append(f"config keys 'env.league.snapshot_every' (>= 0) and "
                        f"'env.league.threshold_matches' (>= 1): got {league.snapshot_every} "
                        f"and {league.threshold_matches}")
    if not is_multiagent(c.env):
        problems += _single_agent_problems(c.env)
    if c.actor.action_mask and algorithm_type(c.algo.name).saved_policy_kind != "actor_critic":
        problems.append(f"config key 'actor.action_mask' masks the moves of an actor-critic's "
                        f"policy; algo.name={c.algo.name} acts with a policy of its own, which "
                        f"would ignore it: use ppo, a2c or impala, or set "
                        f"actor.action_mask=false")
    if c.actor.action_mask and c.env.normalize_obs:
        problems.append("config key 'actor.action_mask' reads the legal moves from the "
                        "observation's last values, which env.normalize_obs would rescale; "
                        "set env.normalize_obs=false")
    if is_multiagent(c.env):
        problems += _shared_agents_problems(c.env, c.scheme.env_groups)
        kind = algorithm_type(c.algo.name).saved_policy_kind
        if not _legal_moves_read(c.env):
            pass  # every agent shares the policy and takes a Box action: no mask to honour
        elif kind != "actor_critic" and not c.actor.action_mask:
            problems.append(f"env.id {c.env.id} is a multi-agent game of Discrete moves, "
                            f"whose legal moves an actor-critic honours (actor.action_mask); "
                            f"algo.name={c.algo.name} acts with a policy of its own: use ppo, "
                            f"a2c or impala")
        elif not c.actor.action_mask:
            problems.append(f"env.id {c.env.id} is a multi-agent game whose observations end "
                            f"with the legal-move mask; set actor.action_mask=true so that "
                            f"illegal moves are never played")
        if c.actor.memory != "none" and agents_mode(c.env) != SHARED:
            problems.append(f"config key 'actor.memory' ({c.actor.memory}): the league's "
                            f"frozen snapshots act inside the envs without a recurrent state; "
                            f"self-play takes feedforward actors (actor.memory=none) for now "
                            f"(agents sharing a policy, env.agents=shared, may have a memory)")
        if c.env.preset != "none":
            problems.append(f"config key 'env.preset' ({c.env.preset}) preprocesses a "
                            f"single-agent env; a multi-agent game is played as it is: set "
                            f"env.preset=none")
        if c.env.backend == "envpool":
            problems.append(f"config key 'env.backend' ({c.env.backend}): a multi-agent game "
                            f"is stepped by Gymnasium's vector envs; use env.backend=gymnasium "
                            f"(or auto)")
    return problems


def _single_agent_problems(env: EnvConfig) -> list[str]:
    """A single-agent env.id reads neither ``env.agents`` nor ``env.league``: set away from
    their defaults they would be ignored, so they are refused naming why."""
    problems = []
    fix = (f"env.id {env.id} is a single-agent env; drop them, or name a multi-agent game "
           f"(env.multiagent=true for an id outside 'pettingzoo.' and 'openspiel:')")
    if env.agents != "auto":
        problems.append(f"config key 'env.agents' ({env.agents}) says who plays the agents of "
                        f"a multi-agent game; {fix}")
    if env.league != type(env.league)():
        problems.append(f"config keys 'env.league.*' are read by self-play on a multi-agent "
                        f"game; {fix}")
    return problems


def _legal_moves_read(env: EnvConfig) -> bool:
    """Whether the trained policy must honour the game's legal moves: always in the league
    (its games take Discrete moves), and under ``env.agents=shared`` where the agents' action
    is Discrete (a Box action has no legal-move mask: any algorithm and no mask)."""
    try:
        if agents_mode(env) != SHARED:
            return True
        game = make_pettingzoo(env.id, **env.kwargs)
    except MultiAgentEnvError:
        return True  # the env's own check says why it cannot be made
    try:
        return isinstance(game.action_space(game.possible_agents[0]), gym.spaces.Discrete)
    finally:
        game.close()


def _shared_agents_problems(env: EnvConfig, groups: int) -> list[str]:
    """``env.agents=shared`` (or auto on a Parallel game): no key of the league, which it
    does not play, and no ``env.wrappers``, which would wrap all the agents' rows at once."""
    if env.agents == "league":
        return []
    try:
        one_seat_a_turn = turn_based(env)
    except MultiAgentEnvError as err:
        return [str(err)]
    if one_seat_a_turn:
        if env.agents == SHARED:
            return [f"config key 'env.agents' (shared) steps every agent at once, but env.id "
                    f"{env.id} is turn-based (PettingZoo's AEC API or OpenSpiel): train it by "
                    f"self-play, env.agents=league (or auto)"]
        return []
    problems = []
    agents = slots_per_game(env)
    if env.num_envs % agents:
        problems.append(f"config key 'env.num_envs' ({env.num_envs}) counts agents under "
                        f"env.agents=shared, {agents} per game of {env.id}: make it a multiple "
                        f"of {agents} (on every collector and env group)")
    elif groups > 1 and (env.num_envs // groups) % agents:
        problems.append(f"config key 'scheme.env_groups' ({groups}) cuts env.num_envs "
                        f"({env.num_envs}) into groups of {env.num_envs // groups} env slots, "
                        f"but a game of {env.id} takes {agents} slots of one group: make "
                        f"env.num_envs a multiple of {agents * groups}, or set "
                        f"scheme.env_groups to 1 or 0 (auto)")
    if env.league != type(env.league)():
        problems.append(f"config keys 'env.league.*' are read when the league plays the other "
                        f"seats (env.agents=league); env.id {env.id} is played with "
                        f"env.agents=shared (every agent the trained policy): set "
                        f"env.agents=league, or drop the env.league keys")
    if env.wrappers:
        problems.append("config key 'env.wrappers': with env.agents=shared a wrapper would see "
                        "every agent's rows at once; wrap the PettingZoo env in your "
                        "'module:function' env.id instead (SuperSuit's wrappers fit there)")
    return problems


def population_league_problem(env: EnvConfig) -> str | None:
    """Why a PBT population cannot train on ``env`` (a multi-agent game played by the league:
    a member's run has PBT's interval hook, so it would publish no league snapshots), or
    None; a game whose agents share the trained policy needs no league."""
    if not is_multiagent(env) or agents_mode(env) == SHARED:
        return None
    return (f"env.id {env.id} is a multi-agent game: a population member's run would publish "
            f"no league snapshots (its interval hook is PBT's); train a self-play league with "
            f"hpcrl train")
