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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

SNAPSHOTS = "snapshots"
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
        partial = path.with_suffix(f".partial-{os.getpid()}")
        torch.save(record, partial)
        os.chmod(partial, stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
        os.replace(partial, path)
    return Snapshot(env_steps, policy, path)


def snapshots(league_dir: Path, upto: int | None = None) -> list[Snapshot]:
    """The league's snapshots, oldest first (only those taken at ``upto`` env steps or
    before, when given)."""
    folder = snapshot_dir(league_dir)
    if not folder.is_dir():
        return []
    found = []
    for path in folder.iterdir():
        match = _NAME.match(path.name)
        if match is not None:
            steps = int(match["steps"])
            if upto is None or steps <= upto:
                found.append(Snapshot(steps, match["policy"], path))
    return sorted(found)


def drop_after(league_dir: Path, env_steps: int) -> list[Snapshot]:
    """Remove the snapshots taken after ``env_steps`` (a resume from a checkpoint of that
    many steps: they belong to the part of the run that is trained again, and the same steps
    publish them again); the removed ones are returned."""
    later = [snap for snap in snapshots(league_dir) if snap.env_steps > env_steps]
    for snap in later:
        snap.path.unlink(missing_ok=True)
    return later


def load_snapshot(snap: Snapshot) -> dict[str, Any]:
    """The saved policy of ``snap``."""
    return torch.load(snap.path, map_location="cpu", weights_only=True)
