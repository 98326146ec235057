"""Lineage: who copied whom, when, at which scores, and which values each key went from and
to. One row per mutated key of each copy (a long table: a key's schedule is its rows, and a
key added to ``pbt.mutate`` on a requeue needs no new column), with the columns
:data:`COLUMNS`.

Each member appends only to its own file, ``population/lineage/member_003.csv``, and
``population/lineage.csv`` is the merge of them all, sorted by time (:meth:`Lineage.rows`;
:meth:`Lineage.write_merged` replaces it atomically after every copy, so it lags a member's
file by at most that member's next copy; readers wanting every row merge the files). Why
files per member rather than every member appending to one file with ``O_APPEND``: members
run on different nodes of a shared file system, and NFS does not make ``O_APPEND`` atomic
across clients (two nodes' rows can overwrite each other); with one writer per file, no
file system has anything to order. A member's copy is written by one ``write`` of all its
rows, on an ``O_APPEND`` descriptor, and fsynced. A write torn by a kill leaves a last line
without its newline: readers drop it, and the member's next append (after a requeue) cuts
it off first.
"""
from __future__ import annotations

import csv
import io
import os
import time
from collections.abc import Mapping
from dataclasses import astuple, dataclass, fields
from pathlib import Path

from hpcrl.population.workspace import write_text_atomic

__all__ = ["COLUMNS", "Lineage", "LineageRow"]


@dataclass(frozen=True)
class LineageRow:
    """One key's change in one copy: member ``member`` copied ``copied_from``."""

    time: float
    env_steps: int
    member: int
    copied_from: int
    score: float  # the copier's score when it copied
    leader_score: float
    key: str
    old: float  # the copier's value before the copy
    new: float  # the leader's value after the explore step

    @classmethod
    def parse(cls, cells: list[str]) -> LineageRow:
        """The row ``cells`` of a CSV line hold; ``ValueError`` when it is not one."""
        if len(cells) != len(COLUMNS):
            raise ValueError(f"{len(cells)} cells, not {len(COLUMNS)}")
        when, steps, member, source, score, leader_score, key, old, new = cells
        return cls(float(when), int(steps), int(member), int(source), float(score),
                   float(leader_score), key, float(old), float(new))


COLUMNS = tuple(f.name for f in fields(LineageRow))


def _lines(rows: list[LineageRow], header: bool) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    if header:
        writer.writerow(COLUMNS)
    writer.writerows(astuple(row) for row in rows)
    return out.getvalue()


def _cut_torn_tail(fd: int, size: int) -> int:
    """Cut a last line without its newline (a write torn by a kill) off the file open on
    ``fd``; its new size."""
    if size == 0:
        return 0
    start = max(0, size - 65536)
    tail = os.pread(fd, size - start, start)
    if tail.endswith(b"\n"):
        return size
    keep = start + tail.rfind(b"\n") + 1 if b"\n" in tail else 0
    os.ftruncate(fd, keep)
    return keep


class Lineage:
    """The lineage files of one population directory."""

    def __init__(self, population_dir: str | Path) -> None:
        self.path = Path(population_dir)

    @property
    def merged_path(self) -> Path:
        """``population/lineage.csv``: every member's rows, sorted by time."""
        return self.path / "lineage.csv"

    def member_path(self, member: int) -> Path:
        """Member ``member``'s own lineage file, which only it appends to."""
        return self.path / "lineage" / f"member_{member:03d}.csv"

    def record(self, member: int, copied_from: int, env_steps: int, scores: tuple[float, float],
               old: Mapping[str, float], new: Mapping[str, float],
               when: float | None = None) -> list[LineageRow]:
        """Append a copy to ``member``'s file: one row per key of ``new`` (``scores``: the
        copier's and the leader's); the rows written."""
        when = time.time() if when is None else when
        rows = [LineageRow(when, env_steps, member, copied_from, scores[0], scores[1], key,
                           float(old.get(key, float("nan"))), float(new[key]))
                for key in sorted(new)]
        path = self.member_path(member)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            size = _cut_torn_tail(fd, os.fstat(fd).st_size)
            data = _lines(rows, header=size == 0).encode()
            while data:  # one write for rows this small; the loop is for a short write
                data = data[os.write(fd, data):]
            os.fsync(fd)
        finally:
            os.close(fd)
        return rows

    def rows(self) -> list[LineageRow]:
        """Every member's rows, by time (then member and key); torn or foreign lines skipped."""
        found: list[LineageRow] = []
        for path in sorted((self.path / "lineage").glob("member_*.csv")):
            found.extend(_read_rows(path))
        return sorted(found, key=lambda row: (row.time, row.member, row.key))

    def write_merged(self) -> Path:
        """Replace ``lineage.csv`` with the merge of every member's file, atomically."""
        write_text_atomic(self.merged_path, _lines(self.rows(), header=True))
        return self.merged_path


def _read_rows(path: Path) -> list[LineageRow]:
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError):
        return []
    lines = text.split("\n")[:-1]  # the last piece is "" or a line torn by a kill
    rows = []
    for cells in csv.reader(lines):
        try:
            rows.append(LineageRow.parse(cells))
        except ValueError:
            continue  # the header, or a line that is not a row
    return rows
