"""Who plays the next match: the opponent sampler of self-play.

Each match draws its opponent from the league's snapshots (and, before the first exists,
plays the ``random`` baseline). Modes:

- ``latest``: the newest snapshot (self-play against the latest self);
- ``uniform``: any snapshot, equally likely (fictitious self-play);
- ``pfsp``: prioritised fictitious self-play (Vinyals et al. 2019, AlphaStar): snapshot
  ``o`` with probability proportional to ``f(p_o)``, ``p_o`` the estimated probability of
  beating it, with ``hard`` weighting ``(1 - p)^2`` (the opponents the policy loses to) or
  ``variance`` ``p (1 - p)`` (the opponents it is even with).

``latest_fraction`` of the matches go to the newest snapshot whatever the mode (ray#6669's
"current self 80 %, past selves 20 %" is ``uniform`` with 0.8). Win rates are estimated
from the matches this sampler saw, with one draw's worth of prior (``(score + 0.5) /
(games + 1)``, a draw scoring one half), so an unplayed snapshot starts at 0.5.
"""
from __future__ import annotations

from typing import Any, Literal

import numpy as np

from hpcrl.envs.multiagent.matches import DRAW, WIN

Mode = Literal["latest", "uniform", "pfsp"]
Weighting = Literal["hard", "variance"]
RANDOM = "random"
LATEST = "latest"  # a fixed opponent's name for the newest snapshot when a match starts
MODES = ("latest", "uniform", "pfsp")
WEIGHTINGS = ("hard", "variance")


def pfsp_weights(win_rates: np.ndarray, weighting: Weighting) -> np.ndarray:
    """PFSP's sampling probabilities of opponents beaten with ``win_rates``; uniform where
    every weight is zero (every opponent always beaten, say)."""
    p = np.asarray(win_rates, dtype=np.float64)
    weights = (1.0 - p) ** 2 if weighting == "hard" else p * (1.0 - p)
    total = weights.sum()
    if total <= 0:
        return np.full(len(p), 1.0 / len(p))
    return weights / total


class OpponentSampler:
    """Draws each match's opponent (see the module) from a generator of its own, seeded, and
    keeps the win-rate statistics PFSP reads; both are in its :meth:`state`."""

    def __init__(self, mode: Mode, weighting: Weighting = "hard", latest_fraction: float = 0.0,
                 seed: int = 0) -> None:
        if mode not in MODES:
            raise ValueError(f"opponent mode {mode!r}: one of {MODES}")
        if weighting not in WEIGHTINGS:
            raise ValueError(f"PFSP weighting {weighting!r}: one of {WEIGHTINGS}")
        self.mode, self.weighting, self.latest_fraction = mode, weighting, latest_fraction
        self.rng = np.random.default_rng(seed)
        self.games: dict[str, int] = {}
        self.score: dict[str, float] = {}

    def win_rate(self, opponent: str) -> float:
        """The estimated probability of beating ``opponent`` (0.5 before any match)."""
        return (self.score.get(opponent, 0.0) + 0.5) / (self.games.get(opponent, 0) + 1)

    def choose(self, candidates: list[str]) -> str:
        """The next match's opponent among ``candidates`` (the league's snapshots, oldest
        first); ``random`` when there is none yet."""
        if not candidates:
            return RANDOM
        latest = candidates[-1]
        draw = self.rng.random()  # one draw a match whatever the mode: a fixed sequence
        if self.mode == "latest" or draw < self.latest_fraction:
            return latest
        if self.mode == "uniform":
            return candidates[int(self.rng.integers(len(candidates)))]
        probs = pfsp_weights(np.array([self.win_rate(c) for c in candidates]), self.weighting)
        return candidates[int(self.rng.choice(len(candidates), p=probs))]

    def record(self, opponent: str, outcome: str | None) -> None:
        """Count a finished match against ``opponent`` (``win``/``draw``/``loss`` for the
        trained policy; None, a match without an outcome, is not counted)."""
        if outcome is None:
            return
        self.games[opponent] = self.games.get(opponent, 0) + 1
        gain = 1.0 if outcome == WIN else 0.5 if outcome == DRAW else 0.0
        self.score[opponent] = self.score.get(opponent, 0.0) + gain

    def state(self) -> dict[str, Any]:
        """Plain data for a checkpoint: the statistics and the generator's position."""
        return {"games": dict(self.games), "score": dict(self.score),
                "rng": self.rng.bit_generator.state}

    def load_state(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state`'s data."""
        self.games = {k: int(v) for k, v in state["games"].items()}
        self.score = {k: float(v) for k, v in state["score"].items()}
        self.rng.bit_generator.state = state["rng"]
