"""Checks of self-play on a multi-agent game (a multi-agent ``env.id``) and of
``actor.action_mask``, made before any rank starts."""
from __future__ import annotations

from hpcrl.algorithms import algorithm_type
from hpcrl.envs.make import is_multiagent
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
    if not 0.0 <= league.win_threshold <= 1.0:
        problems.append(f"config key 'env.league.win_threshold' must be in [0, 1] (0: off), got "
                        f"{league.win_threshold}")
    if league.snapshot_every < 0 or league.threshold_matches < 1:
        problems.append(f"config keys 'env.league.snapshot_every' (>= 0) and "
                        f"'env.league.threshold_matches' (>= 1): got {league.snapshot_every} "
                        f"and {league.threshold_matches}")
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
        kind = algorithm_type(c.algo.name).saved_policy_kind
        if kind != "actor_critic" and not c.actor.action_mask:
            problems.append(f"env.id {c.env.id} is a multi-agent game, trained by self-play "
                            f"with an actor-critic that honours its legal moves; algo.name="
                            f"{c.algo.name} acts with a policy of its own: use ppo, a2c or "
                            f"impala")
        elif not c.actor.action_mask:
            problems.append(f"env.id {c.env.id} is a multi-agent game whose observations end "
                            f"with the legal-move mask; set actor.action_mask=true so that "
                            f"illegal moves are never played")
        if c.actor.memory != "none":
            problems.append(f"config key 'actor.memory' ({c.actor.memory}): the league's "
                            f"frozen snapshots act inside the envs without a recurrent state; "
                            f"self-play takes feedforward actors (actor.memory=none) for now")
        if c.env.preset != "none":
            problems.append(f"config key 'env.preset' ({c.env.preset}) preprocesses a "
                            f"single-agent env; a multi-agent game is played as it is: set "
                            f"env.preset=none")
        if c.env.backend == "envpool":
            problems.append(f"config key 'env.backend' ({c.env.backend}): a multi-agent game "
                            f"is stepped by Gymnasium's vector envs; use env.backend=gymnasium "
                            f"(or auto)")
    return problems


def population_league_problem(env: EnvConfig) -> str | None:
    """Why a PBT population cannot train on ``env`` (a multi-agent game: a member's run has
    PBT's interval hook, so it would publish no league snapshots), or None."""
    if not is_multiagent(env):
        return None
    return (f"env.id {env.id} is a multi-agent game: a population member's run would publish "
            f"no league snapshots (its interval hook is PBT's); train a self-play league with "
            f"hpcrl train")
