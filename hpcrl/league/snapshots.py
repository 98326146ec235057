"""Snapshots of a trained policy, kept in the run directory by the env steps they were taken
at, and immutable once written.

A snapshot is a saved policy (:func:`~hpcrl.trained.saved_policy.saved_policy`: weights and
what rebuilds them) in ``RUN/league/snapshots/<policy>-<env steps>.pt``. It is written to a
temporary name and renamed into place, then made read-only, so a reader never sees half a
file and nothing rewrites one (ray#35393: frozen opponents overwritten because weights were
not copied). Publishing a name that exists keeps the file: after an exact resume the same
step's weights are the same bits.
"""
from __future__ import annotations

import os
import re
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcrl.runtime.checkpoint import load_checkpoint, save_atomic

SNAPSHOTS = "snapshots"
PLAYER = "main"  # the trained policy's name in snapshots, matches.csv and ratings
# each folder's listing, with the folder's modification time it was read at
_LISTED: dict[Path, tuple[int, list[Snapshot]]] = {}
_NAME = re.compile(r"^(?P<policy>[A-Za-z0-9_.]+)-(?P<steps>\d{12})\.pt$")


@dataclass(frozen=True, order=True)
class Snapshot:
    """One snapshot: its env steps (what orders them), the policy it froze, its file."""

    env_steps: int
    policy: str
    path: Path

    @property
    def name(self) -> str:
        """How matches.csv and the league table name it: ``<policy>-<env steps>``."""
        return f"{self.policy}-{self.env_steps}"


def snapshot_dir(league_dir: Path) -> Path:
    """Where a league's snapshot files lie."""
    return Path(league_dir) / SNAPSHOTS


def publish(league_dir: Path, policy: str, env_steps: int, record: dict[str, Any]) -> Snapshot:
    """Write ``record`` (a saved policy) as the snapshot of ``policy`` at ``env_steps``,
    atomically and read-only; an existing snapshot of that name is kept as it is."""
    if not re.fullmatch(r"[A-Za-z0-9_.]+", policy):
        raise ValueError(f"policy name {policy!r}: use letters, digits, '_' and '.'")
    folder = snapshot_dir(league_dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{policy}-{env_steps:012d}.pt"
    if not path.exists():
        save_atomic(record, path)  # hpcrl's checkpoint format: hpcrl eval reads it too
        os.chmod(path, stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    return Snapshot(env_steps, policy, path)


def snapshots(league_dir: Path, upto: int | None = None) -> list[Snapshot]:
    """The league's snapshots, oldest first (only those taken at ``upto`` env steps or
    before, when given)."""
    folder = snapshot_dir(league_dir)
    try:
        changed = os.stat(folder).st_mtime_ns  # a file added or removed changes it
    except FileNotFoundError:
        return []
    listed = _LISTED.get(folder)
    # a match's start reads it: listed again on a change, and for two seconds after one (a
    # file added within the clock tick of the last listing leaves the time as it was)
    recent = time.time_ns() - changed < 2_000_000_000
    if listed is None or listed[0] != changed or recent:
        found = []
        for path in folder.iterdir():
            match = _NAME.match(path.name)
            if match is not None:
                found.append(Snapshot(int(match["steps"]), match["policy"], path))
        listed = _LISTED[folder] = (changed, sorted(found))
    return [snap for snap in listed[1] if upto is None or snap.env_steps <= upto]


def drop_after(league_dir: Path, env_steps: int, policy: str | None = None) -> list[Snapshot]:
    """Remove the snapshots taken after ``env_steps`` (a resume from a checkpoint of that
    many steps: they belong to the part of the run that is trained again, and the same steps
    publish them again), of ``policy`` only when given (a league of several trained
    policies, each counting its own env steps); the removed ones are returned."""
    later = [snap for snap in snapshots(league_dir) if snap.env_steps > env_steps
             and (policy is None or snap.policy == policy)]
    for snap in later:
        snap.path.unlink(missing_ok=True)
    return later


def load_snapshot(snap: Snapshot) -> dict[str, Any]:
    """The saved policy of ``snap``."""
    return load_checkpoint(snap.path)
