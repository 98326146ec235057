"""Scripted connect-four opponents for ``hpcrl eval RUN --opponent`` and
``env.league.eval_opponent``: ``connect_four_bots:OnePlyLookahead``.

A scripted opponent is a class made with no arguments whose ``act(obs, mask, rng)`` returns a
legal move; ``obs`` is the seat's flat observation as the trained policy sees it
(PettingZoo's 6 x 7 x 2 board planes, the mover's pieces first, then the legal-move mask).
"""
from __future__ import annotations

import numpy as np

ROWS, COLUMNS = 6, 7


def _wins(board: np.ndarray) -> bool:
    """Whether ``board`` (6 x 7, 1 where the player has a piece) holds four in a row."""
    for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
        for r in range(ROWS):
            for c in range(COLUMNS):
                cells = [(r + k * dr, c + k * dc) for k in range(4)]
                if all(0 <= rr < ROWS and 0 <= cc < COLUMNS and board[rr, cc]
                       for rr, cc in cells):
                    return True
    return False


def _drop(board: np.ndarray, occupied: np.ndarray, column: int) -> np.ndarray:
    """``board`` with a piece dropped into ``column`` (the lowest free row)."""
    row = max(r for r in range(ROWS) if not occupied[r, column])
    after = board.copy()
    after[row, column] = 1
    return after


class OnePlyLookahead:
    """Plays a move that wins at once if there is one, else blocks a move that would win at
    once for the opponent, else a random legal move."""

    def act(self, obs: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> int:
        """The move (a column)."""
        planes = np.asarray(obs[:ROWS * COLUMNS * 2]).reshape(ROWS, COLUMNS, 2) > 0.5
        mine, theirs = planes[..., 0], planes[..., 1]
        occupied = mine | theirs
        legal = [int(c) for c in np.flatnonzero(mask)]
        for board in (mine, theirs):  # win first, then block
            for column in legal:
                if _wins(_drop(board, occupied, column)):
                    return column
        return legal[int(rng.integers(len(legal)))]
