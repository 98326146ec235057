"""Frozen policies in the league from its start (``env.league.frozen``): policies trained
elsewhere, never trained here, that the trained policy meets like its own snapshots.

Each ``{name: path}`` (a run directory, whose checkpoint's policy is taken, a checkpoint
file, or a saved policy such as another run's snapshot) joins as the snapshot
``<name>-0``: taken at 0 env steps, it is drawn from the second collection on like every
snapshot (:mod:`~hpcrl.league.selfplay_env`), kept through resumes (only snapshots after
a checkpoint are removed), rated in ``hpcrl league`` and playable as
``env.league.eval_opponent``. The frozen policy must act on this game as the trained one
does: an actor-critic over the same observations (legal-move mask included) and moves.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hpcrl.league.snapshots import PLAYER, Snapshot, publish
from hpcrl.runtime.saved_records import saved_record

FROZEN_STEPS = 0  # the env steps a frozen policy's snapshot is named by: there from the start
_NAME = re.compile(r"[A-Za-z0-9_.]+")


def frozen_problems(frozen: Mapping[str, Any], obs_shape: tuple[int, ...], moves: int,
                    player: str = PLAYER) -> list[str]:
    """Why the policies of ``env.league.frozen`` cannot play a game whose trained policy
    (named ``player``) observes ``obs_shape`` and has ``moves`` moves (each with its fix), or
    none."""
    problems = []
    for name, path in frozen.items():
        key = f"config key 'env.league.frozen.{name}'"
        if not _NAME.fullmatch(str(name)) or name == player:
            problems.append(f"{key}: a frozen policy's name uses letters, digits, '_' and '.', "
                            f"and is not '{player}' (the trained policy's, env.league.player)")
            continue
        try:
            record = saved_record(str(path))
        except Exception as err:  # a missing path, a file that is no checkpoint
            problems.append(f"{key} ({path}): no saved policy there ({err}); give a run "
                            f"directory, a checkpoint file or a snapshot of another run")
            continue
        action = record.get("action", {})
        fits = (record.get("acts_with", "actor_critic") == "actor_critic"
                and tuple(record.get("obs_shape", ())) == tuple(obs_shape)
                and action.get("type") == "discrete" and int(action.get("n", -1)) == moves)
        if not fits:
            problems.append(f"{key} ({path}): its policy observes {record.get('obs_shape')} "
                            f"and acts {action.get('type')} {action.get('n', '')}, but this "
                            f"game's trained policy observes {list(obs_shape)} (its legal "
                            f"moves last) and has {moves} moves: give a policy trained on this "
                            f"game with actor.action_mask")
    return problems


def seed_league(league_dir: Path, frozen: Mapping[str, Any]) -> list[Snapshot]:
    """Publish each frozen policy as the snapshot ``<name>-0`` of ``league_dir`` (kept as it
    is where it was published already: a resume)."""
    return [publish(league_dir, name, FROZEN_STEPS, saved_record(str(path)))
            for name, path in frozen.items()]
