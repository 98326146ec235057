"""The seed of every match an env plays, so that runs repeat and resumes continue.

Env ``i`` of a job (its *global index*) starts its first match with ``seed + i``, as
hpcrl's single-agent envs do (:func:`hpcrl.envs.vector.env_seeds`). Every later match is
reset with a seed of its own too, derived from ``seed + i`` and the match's number, instead
of letting the env's generator run on: a match can then be replayed alone from the seed that
``matches.csv`` will record, and a resume needs only the match counter to continue the
sequence (no env generator state, which many PettingZoo envs do not expose).
"""
from __future__ import annotations

from typing import Any

import numpy as np

# seeds stay below 2**31: every env's ``reset(seed=)`` takes them (some pass them to C code)
_SEED_BOUND = 2**31


def episode_seed(seed: int, env_index: int, episode: int) -> int:
    """The seed of match ``episode`` (0, 1, ...) of the env of global index ``env_index``:
    ``seed + env_index`` for the first, then one drawn from both and the match's number."""
    base = seed + env_index
    if episode == 0:
        return base
    words = np.random.SeedSequence([base % _SEED_BOUND, episode]).generate_state(1)
    return int(words[0]) % _SEED_BOUND


class EpisodeSeeds:
    """The seed sequence of one env: hands out the seed of each match in turn and keeps the
    count of matches started, which is all a checkpoint needs to continue the sequence."""

    def __init__(self, seed: int, env_index: int) -> None:
        self.seed = seed
        self.env_index = env_index
        self.episode = 0  # the number of the next match

    def next(self) -> tuple[int, int]:
        """The number and seed of the next match, counted as started."""
        episode = self.episode
        self.episode += 1
        return episode, episode_seed(self.seed, self.env_index, episode)

    def state(self) -> dict[str, Any]:
        """Plain data for a checkpoint (``torch.load(weights_only=True)`` reads it)."""
        return {"seed": self.seed, "env_index": self.env_index, "episode": self.episode}

    def load_state(self, state: dict[str, Any]) -> None:
        """Continue from a state :meth:`state` gave, refusing one of another env or seed
        (a changed ``env.seed`` or env layout would silently replay other matches)."""
        if (state["seed"], state["env_index"]) != (self.seed, self.env_index):
            raise ValueError(f"the checkpoint's env state is of env {state['env_index']} with "
                             f"seed {state['seed']}, not env {self.env_index} with seed "
                             f"{self.seed}: the seed or the env layout changed")
        self.episode = int(state["episode"])
