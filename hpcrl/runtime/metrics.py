"""Episode statistics over a window, and the ``progress.csv`` row of one update."""
from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from typing import Any

import torch

WINDOW_EPISODES = 100


class EpisodeWindow:
    """Mean return and length of the most recent (at least) 100 finished episodes.

    Episodes arrive as per-update chunks ``(count, return sum, length sum)`` (which is what
    crosses ranks); the oldest chunks are dropped while the rest still hold 100 episodes.
    """

    def __init__(self, episodes: int = WINDOW_EPISODES) -> None:
        self.episodes = episodes
        self.chunks: deque[tuple[float, float, float]] = deque()

    def add(self, count: float, return_sum: float, length_sum: float) -> None:
        """Add one update's chunk of ``count`` episodes (none: ignored), then drop the oldest chunks
        while the others still hold the window's episodes."""
        if count <= 0:
            return
        self.chunks.append((float(count), float(return_sum), float(length_sum)))
        while (len(self.chunks) > 1
               and sum(c[0] for c in self.chunks) - self.chunks[0][0] >= self.episodes):
            self.chunks.popleft()

    def means(self) -> tuple[float, float]:
        """Mean episode return and length over the window (NaN, NaN before any episode)."""
        count = sum(c[0] for c in self.chunks)
        if count == 0:
            return math.nan, math.nan
        return (sum(c[1] for c in self.chunks) / count, sum(c[2] for c in self.chunks) / count)

    def state(self) -> torch.Tensor:
        """The chunks as a ``[n, 3]`` float64 tensor, for a checkpoint."""
        return torch.tensor(list(self.chunks), dtype=torch.float64).reshape(-1, 3)

    def load(self, state: torch.Tensor) -> None:
        """Restore the chunks :meth:`state` gave."""
        self.chunks = deque((float(a), float(b), float(c)) for a, b, c in state.tolist())


def progress_row(env_steps: int, updates: int, wall_time_s: float, fps: float,
                 episodes: EpisodeWindow, finished: int, stats: Mapping[str, float],
                 scheme_metrics: Mapping[str, float]) -> dict[str, Any]:
    """One row of ``progress.csv`` (columns from ``hpcrl.runtime.progress.columns_for``)."""
    ret, length = episodes.means()
    row: dict[str, Any] = {"env_steps": env_steps, "updates": updates,
                           "wall_time_s": wall_time_s, "fps": fps,
                           "episode_return_mean": ret, "episode_length_mean": length,
                           "episodes": finished}
    row.update(stats)
    row.update(scheme_metrics)
    return row
