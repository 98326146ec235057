"""``matches.csv``: every finished self-play match, who played whom, in which seats, and how
it ended.

Each env appends its own matches to ``RUN/league/matches/env-<seed>.csv`` (no two processes
ever write one file, on any file system), and remembers how long the file was at each
checkpoint: a resume cuts it back to that length, so a match is never logged twice and the
log holds exactly the matches of the run that was kept. :func:`read_matches` merges the
files in time order, which is the league's ``matches.csv`` (``hpcrl league RUN`` writes it).
"""
from __future__ import annotations

import csv
import io
import time
from dataclasses import dataclass
from pathlib import Path

MATCHES = "matches"
COLUMNS = ("wall_time", "env_seed", "match", "match_seed", "player", "player_seat",
           "opponent", "opponent_seats", "outcome", "return", "length")


@dataclass(frozen=True)
class MatchRow:
    """One finished match as ``matches.csv`` holds it: when, which env (its first seed) and
    which of its matches (number and seed), the trained policy's name and seat, the
    opponent's name and seats, the outcome for the trained policy (``win``, ``draw``,
    ``loss``, or empty where the game gives none), its return and the match's length."""

    wall_time: float
    env_seed: int
    match: int
    match_seed: int
    player: str
    player_seat: str
    opponent: str
    opponent_seats: str
    outcome: str
    ret: float
    length: int

    def cells(self) -> list[str]:
        """The row's cells in :data:`COLUMNS` order."""
        return [f"{self.wall_time:.3f}", str(self.env_seed), str(self.match),
                str(self.match_seed), self.player, self.player_seat, self.opponent,
                self.opponent_seats, self.outcome, repr(float(self.ret)), str(self.length)]


def match_dir(league_dir: Path) -> Path:
    """Where each env's match file lies."""
    return Path(league_dir) / MATCHES


class MatchLog:
    """One env's match file: appends rows, and gives the file's length to a checkpoint."""

    def __init__(self, league_dir: Path, env_seed: int) -> None:
        self.path = match_dir(league_dir) / f"env-{env_seed}.csv"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not self.path.exists() or self.path.stat().st_size == 0:
            self.path.write_text(",".join(COLUMNS) + "\n")

    def append(self, row: MatchRow) -> None:
        """Log one finished match (one write of one line)."""
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\n").writerow(row.cells())
        with self.path.open("a") as out:
            out.write(buffer.getvalue())

    def length(self) -> int:
        """The file's length in bytes: what a checkpoint keeps."""
        return self.path.stat().st_size

    def cut_to(self, length: int) -> None:
        """Cut the file back to ``length`` bytes (a resume: the matches after the checkpoint
        are played again)."""
        with self.path.open("r+b") as out:
            out.truncate(length)


def now() -> float:
    """The wall time a row records (seconds since the epoch)."""
    return time.time()


def read_matches(league_dir: Path) -> list[MatchRow]:
    """Every env's logged matches, in time order (then env and match number)."""
    rows = []
    folder = match_dir(league_dir)
    for path in sorted(folder.glob("env-*.csv")) if folder.is_dir() else []:
        with path.open(newline="") as src:
            for cell in csv.DictReader(src):
                rows.append(MatchRow(float(cell["wall_time"]), int(cell["env_seed"]),
                                     int(cell["match"]), int(cell["match_seed"]),
                                     cell["player"], cell["player_seat"], cell["opponent"],
                                     cell["opponent_seats"], cell["outcome"],
                                     float(cell["return"]), int(cell["length"])))
    return sorted(rows, key=lambda r: (r.wall_time, r.env_seed, r.match))


def write_matches_csv(rows: list[MatchRow], path: Path) -> Path:
    """``rows`` as one ``matches.csv`` at ``path``."""
    with path.open("w", newline="") as out:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(COLUMNS)
        for row in rows:
            writer.writerow(row.cells())
    return path
