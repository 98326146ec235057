"""Finished matches: each seat's return and, where the game's final rewards say so, who won.

What ``matches.csv`` and the league's ratings will read. A game's outcome is read from the
reward each seat received in its final step (:func:`zero_sum_outcomes`, the default): a
board game ends with +1 for the winner, -1 for the loser and 0 each for a draw. A match that
was cut short (a seat truncated) or whose final rewards do not sum to zero (a cooperative
task, a score) has no outcome; an env with other conventions passes its own rule.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hpcrl.envs.multiagent.seats import EpisodeEnd

WIN, DRAW, LOSS = "win", "draw", "loss"
OUTCOMES = (WIN, DRAW, LOSS)
# how far from zero the final rewards' sum may be for a zero-sum game (float rewards)
_ZERO_SUM_TOLERANCE = 1e-6

OutcomeRule = Callable[[EpisodeEnd], "dict[str, str] | None"]


def zero_sum_outcomes(end: EpisodeEnd) -> dict[str, str] | None:
    """Win, draw or loss per seat from the signs of the final rewards, when every seat's match
    ended by termination and the final rewards sum to zero; None otherwise."""
    if not end.seats or any(end.truncated.values()) or not all(end.terminated.values()):
        return None
    finals = [end.final_rewards.get(seat, 0.0) for seat in end.seats]
    if abs(sum(finals)) > _ZERO_SUM_TOLERANCE:
        return None
    return {seat: WIN if final > 0 else LOSS if final < 0 else DRAW
            for seat, final in zip(end.seats, finals, strict=True)}


@dataclass(frozen=True)
class MatchResult:
    """A finished match: where it was played (the env's global index, the match's number and
    seed), who took part, each seat's return, the number of env steps, and each seat's
    outcome (None where the rule gives none)."""

    env_index: int
    episode: int
    seed: int
    seats: tuple[str, ...]
    returns: dict[str, float]
    length: int
    outcomes: dict[str, str] | None


class MatchTracker:
    """Turns the matches envs finish into :class:`MatchResult` and keeps a tally of
    outcomes per seat (win, draw, loss) and the number of matches, which a checkpoint keeps."""

    def __init__(self, seats: tuple[str, ...], outcome: OutcomeRule | None = zero_sum_outcomes
                 ) -> None:
        self.seats = seats
        self.outcome = outcome
        self.matches = 0
        self.tally: dict[str, dict[str, int]] = {seat: dict.fromkeys(OUTCOMES, 0)
                                                 for seat in seats}

    def record(self, end: EpisodeEnd) -> MatchResult:
        """The result of match ``end``, counted in the tally."""
        outcomes = self.outcome(end) if self.outcome is not None else None
        self.matches += 1
        for seat, outcome in (outcomes or {}).items():
            self.tally[seat][outcome] += 1
        return MatchResult(end.env_index, end.episode, end.seed, end.seats, end.returns,
                           end.length, outcomes)

    def state(self) -> dict[str, Any]:
        """Plain data for a checkpoint."""
        return {"matches": self.matches, "tally": {s: dict(t) for s, t in self.tally.items()}}

    def load_state(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state`'s data."""
        self.matches = int(state["matches"])
        self.tally = {seat: {o: int(state["tally"].get(seat, {}).get(o, 0)) for o in OUTCOMES}
                      for seat in self.seats}
