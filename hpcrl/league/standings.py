"""The league table: each opponent the trained policy met, its record against it, and every
player's rating (what ``hpcrl league RUN`` prints)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hpcrl.envs.multiagent.matches import DRAW, LOSS, WIN
from hpcrl.league.match_log import MatchRow
from hpcrl.league.ratings import Ratings, System, rate


@dataclass(frozen=True)
class Standing:
    """The trained policy's record against one opponent, and the opponent's rating."""

    opponent: str
    games: int
    wins: int
    draws: int
    losses: int
    rating: float

    @property
    def win_rate(self) -> float:
        """Wins over games (draws count half), NaN before any."""
        return (self.wins + 0.5 * self.draws) / self.games if self.games else float("nan")


def standings(rows: Sequence[MatchRow], system: System = "elo"
              ) -> tuple[list[Standing], Ratings]:
    """The record against each opponent (most played first) and the ratings after ``rows``."""
    ratings = rate(rows, system)
    tally: dict[str, list[int]] = {}
    for row in rows:
        counts = tally.setdefault(row.opponent, [0, 0, 0, 0])
        counts[0] += 1
        if row.outcome in (WIN, DRAW, LOSS):
            counts[1 + (WIN, DRAW, LOSS).index(row.outcome)] += 1
    table = [Standing(name, counts[0], counts[1], counts[2], counts[3], ratings.rating(name))
             for name, counts in tally.items()]
    return sorted(table, key=lambda s: (-s.games, s.opponent)), ratings


def format_table(table: Sequence[Standing], ratings: Ratings) -> str:
    """The league table as text: the trained players' ratings, then a row per opponent."""
    lines = []
    players = sorted({p for p in ratings.curves} - {s.opponent for s in table})
    for player in players:
        lines.append(f"{player}: rating {ratings.rating(player):.0f} ({ratings.system})")
    lines.append(f"{'opponent':<24} {'games':>6} {'wins':>6} {'draws':>6} {'losses':>6} "
                 f"{'win rate':>9} {'rating':>7}")
    for s in table:
        lines.append(f"{s.opponent:<24} {s.games:>6} {s.wins:>6} {s.draws:>6} {s.losses:>6} "
                     f"{s.win_rate:>9.3f} {s.rating:>7.0f}")
    return "\n".join(lines)
