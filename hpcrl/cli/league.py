"""``hpcrl league RUN``: a self-play run's league table, and its ``matches.csv``."""
from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import click
import yaml

from hpcrl.cli.refusals import refusing
from hpcrl.sections.schema import EnvConfig


def league_dir_of(run: Path) -> Path:
    """The league folder of a run directory, or of the run a file of it belongs to (a
    checkpoint, ``RUN/checkpoints/latest.pt``, or a snapshot,
    ``RUN/league/snapshots/main-<env steps>.pt``); a policy's run of a league job,
    ``RUN/policies/<name>``, plays in the job's, ``RUN/league``."""
    run = Path(run)
    if run.is_file():
        run = next((p for p in run.parents if (p / "config.yaml").is_file()), run.parent)
    if not (run / "league").is_dir() and run.parent.name == "policies":
        return run.parent.parent / "league"  # a policy's run in a league job of several
    return run / "league"


@click.command("league")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--ratings", "system", type=click.Choice(["elo", "openskill"]), default=None,
              help="Rating system (default: the run's env.league.ratings).")
@refusing
def league_command(run_dir: str, system: str | None) -> None:
    """Print the league table of self-play run RUN_DIR: every opponent the trained policy met
    (random play, snapshots), its record against it and the ratings; writes the matches of
    every env, in time order, to RUN_DIR/league/matches.csv."""
    from hpcrl.league.match_log import read_matches, write_matches_csv
    from hpcrl.league.snapshots import snapshots
    from hpcrl.league.standings import format_table, standings

    folder = league_dir_of(Path(run_dir))
    if not folder.is_dir():
        raise click.UsageError(f"{run_dir} has no league: it is not a self-play run (a "
                               f"multi-agent env.id with env.agents=league)")
    if system is None:
        config = yaml.safe_load((Path(run_dir) / "config.yaml").read_text())
        system = config.get("env", {}).get("league", {}).get("ratings", "elo")
    rows = read_matches(folder)
    table, ratings = standings(rows, system)  # type: ignore[arg-type]
    written = write_matches_csv(rows, folder / "matches.csv")
    snaps = snapshots(folder)
    click.echo(f"league of {run_dir}: {len(snaps)} snapshots, {len(rows)} matches "
               f"({written})")
    click.echo(format_table(table, ratings))


def against(env: EnvConfig, run: Path, opponent: str | None) -> EnvConfig:
    """The env section ``env`` evaluated against ``opponent`` (None: its own
    ``env.league.eval_opponent``), with the run's league where a snapshot opponent is read
    from; refused for a run that is not a self-play one."""
    from hpcrl.envs.multiagent.play_modes import is_multiagent, plays_league
    from hpcrl.league.selfplay_env import LEAGUE_DIR_VARIABLE

    if not plays_league(env):
        kind = ("a multi-agent game whose agents all share the trained policy "
                "(env.agents=shared)" if is_multiagent(env) else "a single-agent env")
        raise click.UsageError(f"--opponent: {env.id} is {kind}; opponents belong to "
                               f"self-play runs of a multi-agent game (env.agents=league)")
    os.environ[LEAGUE_DIR_VARIABLE] = str(league_dir_of(run))
    if opponent is None:
        return env
    return replace(env, league=replace(env.league, eval_opponent=opponent))


def outcome_line(returns: list[float], env: EnvConfig) -> str:
    """Wins, draws and losses of evaluation episodes against ``env.league.eval_opponent``,
    read from their returns' signs (a board game's +1, 0, -1)."""
    opponent = env.league.eval_opponent
    wins = sum(r > 0 for r in returns)
    draws = sum(r == 0 for r in returns)
    losses = len(returns) - wins - draws
    rate = (wins + 0.5 * draws) / max(len(returns), 1)
    return (f"against {opponent}: {wins} wins, {draws} draws, {losses} losses "
            f"(win rate {rate:.3f})")


def league_job_plan(config: Any, notes: list[str]) -> tuple[str, dict[str, Any]]:
    """``hpcrl plan`` of a league job of several policies (the ``policies`` section): each
    policy's plan on its share of the launch's ranks, as text and as JSON. The launch's size
    is the sum of the policies' (each at least its scheme's world size)."""
    from hpcrl.config.policy_configs import policy_configs, policy_names, rank_split
    from hpcrl.config.validate_policies import role_of
    from hpcrl.scheme import required_world_size
    from hpcrl.scheme.plan import plan_json, plan_text

    configs = policy_configs(config)
    fixed = {name: int(value["ranks"]) for name, value in config.policies.items()
             if isinstance(value, dict) and value.get("ranks") is not None}
    even = max([required_world_size(c.scheme) for n, c in configs.items() if n not in fixed]
               or [0])
    size = sum(fixed.get(n, even) for n in policy_names(config))
    split = rank_split(config, size)
    lines = [f"league job of {len(split)} policies, each a run of its own in "
             f"RUN/policies/<name>, all in one league (RUN/league)",
             f"world size: {size}   (mpiexec -n {size} hpcrl train ...)", *notes]
    info: dict[str, Any] = {"world_size": size, "policies": {}}
    start = 0
    for name, ranks in split:
        sub = configs[name]
        league = sub.env.league
        plays = (f"{', '.join(league.versus)}'s snapshots" if league.versus
                 else "the league")
        lines += ["", f"policy {name}: role {role_of(config, name)}, world ranks "
                      f"{start}-{start + ranks - 1}, plays {plays} ({league.opponents})"
                      + (f", starts again with probability {league.reset_fraction:g} when a "
                         f"snapshot joins" if league.reset_fraction > 0 else "")]
        lines += ["  " + (f"ranks: {ranks}" if line.startswith("world size:") else line)
                  if line else line for line in plan_text(sub).splitlines()]
        info["policies"][name] = {**plan_json(sub), "role": role_of(config, name),
                                  "world_ranks": [start, start + ranks - 1]}
        start += ranks
    return "\n".join(lines), info
