"""Demonstration files: episodes as rows of one ``.npz``, the format ``hpcrl eval --record``
writes.

One row per env step, episodes back to back in the order they were played:

* ``obs``: the observation the policy acted on (the training env's preprocessing: an Atari
  frame stack stays uint8 ``[4, 84, 84]``); a ``Dict`` observation is one array per key,
  ``obs/<key>``, and a ``Tuple`` one per position, ``obs/<index>``;
* ``actions``: the action the env was given;
* ``rewards``: the env's reward for the step (float32);
* ``terminated`` / ``truncated``: how the step ended its episode (bool), ``truncated`` also
  where the evaluation cut an episode at its step cap.

An episode ends at the row where ``terminated | truncated``; every file ends with one.
:func:`read_demos` reads a file back and checks that shape.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

KEYS = ("actions", "rewards", "terminated", "truncated")


def _obs_arrays(rows: list[Any]) -> dict[str, np.ndarray]:
    """The ``obs`` entries of the file for the observations ``rows``."""
    first = rows[0]
    if isinstance(first, dict):
        return {f"obs/{key}": np.stack([np.asarray(r[key]) for r in rows]) for key in first}
    if isinstance(first, tuple):
        return {f"obs/{i}": np.stack([np.asarray(r[i]) for r in rows])
                for i in range(len(first))}
    return {"obs": np.stack([np.asarray(r) for r in rows])}


class DemoRecorder:
    """Collects the steps of episodes played in any interleaving; writes them back to back,
    in episode order."""

    def __init__(self, episodes: int) -> None:
        self.steps: list[list[tuple[Any, Any, float, bool, bool]]] = [[] for _ in range(episodes)]

    def step(self, episode: int, obs: Any, action: Any, reward: float, terminated: bool,
             truncated: bool) -> None:
        """Episode ``episode`` acted ``action`` on ``obs`` and the env answered."""
        self.steps[episode].append((obs, np.asarray(action), float(reward), bool(terminated),
                                    bool(truncated)))

    def write(self, path: str | Path) -> int:
        """Write the file (its directory made if need be); returns the rows written."""
        rows = [step for episode in self.steps for step in episode]
        if not rows:
            raise ValueError("no steps were recorded: nothing to write")
        obs, actions, rewards, terminated, truncated = zip(*rows, strict=True)
        arrays = _obs_arrays(list(obs))
        arrays.update(actions=np.stack(actions), rewards=np.asarray(rewards, np.float32),
                      terminated=np.asarray(terminated, bool),
                      truncated=np.asarray(truncated, bool))
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        # numpy's stub matches a **dict against allow_pickle: bool; the names are arrays
        np.savez_compressed(Path(path), **arrays)  # type: ignore[arg-type]
        return len(rows)


def read_demos(path: str | Path) -> dict[str, np.ndarray]:
    """A demonstration file's arrays; ValueError naming what is wrong with one that does not
    follow the format (a missing array, rows of different counts, an unfinished episode)."""
    with np.load(Path(path)) as data:
        arrays = {key: data[key] for key in data.files}
    missing = [k for k in KEYS if k not in arrays]
    if not any(k == "obs" or k.startswith("obs/") for k in arrays):
        missing.insert(0, "obs")
    if missing:
        raise ValueError(f"'{path}' is not a demonstration file: it lacks {', '.join(missing)} "
                         f"(hpcrl eval RUN --record FILE writes one)")
    counts = {key: len(value) for key, value in arrays.items()}
    if len(set(counts.values())) != 1:
        raise ValueError(f"'{path}': its arrays hold different numbers of rows: {counts}")
    ends = arrays["terminated"] | arrays["truncated"]
    if len(ends) == 0 or not ends[-1]:
        raise ValueError(f"'{path}': its last episode does not end (no terminated or "
                         f"truncated row at the end)")
    return arrays
