"""The population's exchange: files under ``RUN_DIR/population/``, with nothing central.

    population/
      member_003.json        member 3's latest scored snapshot (Snapshot), replaced atomically
      member_003/            member 3's own place: the leader checkpoint it copied last
      lineage/, lineage.csv  who copied whom (hpcrl.population.lineage)

Each member writes only its own files, so writers of different members never collide and no
lock is needed. Every write goes to a temporary file in the same directory, is flushed to
disk (fsync) and renamed over the old file (``os.replace``): a reader sees the old snapshot
or the new one, never half. Readers still trust nothing (a file copied by hand, a shared file
system that lost a write in a node's crash, a member of an older hpcrl): a snapshot that is
missing, torn or not a snapshot is skipped, never an error, so a lost, requeued or late
member never stops the others.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from hpcrl.runtime.run_dir import writing

__all__ = ["Snapshot", "Workspace", "write_atomic", "write_text_atomic"]


def write_atomic(path: Path, write: Callable[[IO[bytes]], object]) -> None:
    """Make ``path`` hold what ``write`` writes, atomically: a temporary file in the same
    directory, fsync, ``os.replace``. A failure leaves the old file as it was and no temporary
    file; an ``OSError`` becomes a :class:`~hpcrl.runtime.run_dir.RunWriteError`."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with writing(f"population file ({path.name})", path):
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with open(tmp, "wb") as f:
                write(f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        finally:
            if tmp.exists():
                tmp.unlink()


def write_text_atomic(path: Path, text: str) -> None:
    """:func:`write_atomic` of ``text`` (UTF-8)."""
    write_atomic(path, lambda f: f.write(text.encode()))


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class Snapshot:
    """One member's scored state at one interval: what its peers rank and may copy."""

    member: int
    env_steps: int
    score: float
    hyperparameters: Mapping[str, float]
    checkpoint: str  # the path of the member's checkpoint that this score belongs to
    time: float = field(default_factory=time.time)

    @property
    def rank_score(self) -> float:
        """The score to rank by: a NaN (a diverged member) ranks below every number."""
        return -math.inf if math.isnan(self.score) else self.score

    def to_json(self) -> str:
        """The snapshot as one JSON object."""
        return json.dumps({"member": self.member, "env_steps": self.env_steps,
                           "score": self.score, "hyperparameters": dict(self.hyperparameters),
                           "checkpoint": self.checkpoint, "time": self.time})

    @classmethod
    def from_json(cls, text: str) -> Snapshot:
        """The snapshot ``text`` holds; ``ValueError`` when it is not a whole snapshot."""
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        hyper = data.get("hyperparameters")
        if not isinstance(hyper, dict) or not all(
                isinstance(k, str) and _number(v) for k, v in hyper.items()):
            raise ValueError("hyperparameters missing or not a mapping of names to numbers")
        if not (isinstance(data.get("member"), int) and isinstance(data.get("env_steps"), int)
                and _number(data.get("score")) and isinstance(data.get("checkpoint"), str)
                and _number(data.get("time"))):
            raise ValueError("a field is missing or of the wrong type")
        return cls(member=data["member"], env_steps=data["env_steps"],
                   score=float(data["score"]), hyperparameters={k: float(v) for k, v in
                                                                hyper.items()},
                   checkpoint=data["checkpoint"], time=float(data["time"]))


class Workspace:
    """The directory ``population/`` of a run: where members publish and read snapshots and
    copy each other's checkpoints."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def snapshot_path(self, member: int) -> Path:
        """Where member ``member``'s latest snapshot lives."""
        return self.path / f"member_{member:03d}.json"

    def member_dir(self, member: int) -> Path:
        """Member ``member``'s own directory (the checkpoints it copied)."""
        return self.path / f"member_{member:03d}"

    def publish(self, snapshot: Snapshot) -> Path:
        """Replace the member's snapshot with ``snapshot``, atomically; its path."""
        path = self.snapshot_path(snapshot.member)
        write_text_atomic(path, snapshot.to_json())
        return path

    def read(self, member: int) -> Snapshot | None:
        """Member ``member``'s latest snapshot, or None when it is missing or unreadable."""
        return self._load(self.snapshot_path(member))

    def snapshots(self) -> list[Snapshot]:
        """Every member's latest readable snapshot, by member; the rest skipped."""
        found = (self._load(path) for path in sorted(self.path.glob("member_*.json")))
        return [snapshot for snapshot in found if snapshot is not None]

    def peers(self, member: int) -> list[Snapshot]:
        """The readable snapshots of every member but ``member``."""
        return [snapshot for snapshot in self.snapshots() if snapshot.member != member]

    def adopt(self, leader: Snapshot, member: int) -> Path | None:
        """Copy ``leader``'s checkpoint into member ``member``'s own place, atomically, and
        return the copy's path; None when the leader's checkpoint is gone or unreadable (the
        leader was lost, or replaced it since), so the caller tries another leader or stays.

        The copy is the member's, not a path into the leader's files: the leader replaces or
        prunes its checkpoints whenever it likes."""
        source = Path(leader.checkpoint)
        destination = self.member_dir(member) / f"from_leader{source.suffix}"
        try:
            with open(source, "rb") as src:
                write_atomic(destination, lambda f: shutil.copyfileobj(src, f))
        except OSError:
            return None
        return destination

    def discard_leftovers(self, member: int) -> None:
        """Remove the temporary files member ``member``'s writers left when a kill stopped
        them between writing and renaming (a requeued member calls this as it starts)."""
        names = (f".member_{member:03d}.json.tmp-*", f"member_{member:03d}/.*.tmp-*")
        for pattern in names:
            for leftover in self.path.glob(pattern):
                leftover.unlink(missing_ok=True)

    def _load(self, path: Path) -> Snapshot | None:
        try:
            snapshot = Snapshot.from_json(path.read_text())
        except (OSError, ValueError, UnicodeDecodeError):
            return None
        # a file renamed or copied under another member's name is not that member's
        return snapshot if path == self.snapshot_path(snapshot.member) else None
