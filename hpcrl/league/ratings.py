"""Ratings of the league's players from the matches they played.

Read from the match log in time order, so they are a function of the log alone and need no
state of their own in a checkpoint. Two systems:

- ``elo``: Elo with K = 16, everyone starting at 1200 (a draw scores one half);
- ``openskill``: the Plackett-Luce model of openskill (a TrueSkill-like Bayesian rating, free
  of TrueSkill's patent), reported as its ordinal ``mu - 3 sigma`` scaled to Elo's range.

Matches without an outcome (a cooperative game's, a match cut short) do not move ratings.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from hpcrl.envs.multiagent.matches import DRAW, LOSS, WIN
from hpcrl.league.match_log import MatchRow

System = Literal["elo", "openskill"]
SYSTEMS = ("elo", "openskill")
ELO_START, ELO_K = 1200.0, 16.0
# openskill's ordinal (mu - 3 sigma, 0 at the start) shown on Elo's scale: 1200 + 8 x ordinal
_OPENSKILL_SCALE = 8.0


@dataclass(frozen=True)
class RatingPoint:
    """A player's rating after one of its matches: the match's wall time and the rating."""

    wall_time: float
    rating: float


def expected_score(rating: float, other: float) -> float:
    """Elo's expected score of a player rated ``rating`` against one rated ``other``."""
    return 1.0 / (1.0 + 10.0 ** ((other - rating) / 400.0))


def _score(outcome: str) -> float:
    return {WIN: 1.0, DRAW: 0.5, LOSS: 0.0}[outcome]


class Ratings:
    """Every player's rating, updated match by match (:meth:`play`), and each player's curve."""

    def __init__(self, system: System = "elo") -> None:
        if system not in SYSTEMS:
            raise ValueError(f"rating system {system!r}: one of {SYSTEMS}")
        self.system = system
        self.curves: dict[str, list[RatingPoint]] = {}
        self._elo: dict[str, float] = {}
        self._model: Any = None
        self._skill: dict[str, Any] = {}
        if system == "openskill":
            try:
                from openskill.models import PlackettLuce
            except ImportError as err:
                raise ValueError(f"ratings 'openskill' need the openskill package ({err}); "
                                 f"fix: pip install 'hpcrl[multiagent]'") from None
            self._model = PlackettLuce()

    def rating(self, player: str) -> float:
        """``player``'s rating now (the starting rating before any match)."""
        if self.system == "elo":
            return self._elo.get(player, ELO_START)
        skill = self._skill.get(player)
        if skill is None:
            return ELO_START
        return ELO_START + _OPENSKILL_SCALE * float(skill.ordinal())

    def play(self, row: MatchRow) -> None:
        """Update both players' ratings with one logged match."""
        if row.outcome not in (WIN, DRAW, LOSS):
            return
        a, b = row.player, row.opponent
        if self.system == "elo":
            ra, rb = self.rating(a), self.rating(b)
            gain = ELO_K * (_score(row.outcome) - expected_score(ra, rb))
            self._elo[a], self._elo[b] = ra + gain, rb - gain
        else:
            self._openskill(a, b, row.outcome)
        for player in (a, b):
            self.curves.setdefault(player, []).append(RatingPoint(row.wall_time,
                                                                  self.rating(player)))

    def _openskill(self, a: str, b: str, outcome: str) -> None:
        model = self._model
        assert model is not None
        for player in (a, b):
            if player not in self._skill:
                self._skill[player] = model.rating(name=player)
        ranks = {WIN: [1.0, 2.0], LOSS: [2.0, 1.0], DRAW: [1.0, 1.0]}[outcome]
        [[new_a], [new_b]] = model.rate([[self._skill[a]], [self._skill[b]]], ranks=ranks)
        self._skill[a], self._skill[b] = new_a, new_b

    def table(self) -> dict[str, float]:
        """Every player's rating now."""
        return {player: self.rating(player) for player in self.curves}


def rate(rows: Iterable[MatchRow], system: System = "elo") -> Ratings:
    """The ratings after ``rows`` (in the order given: the log's time order)."""
    ratings = Ratings(system)
    for row in rows:
        ratings.play(row)
    return ratings
