"""The players of a self-play env's other seats: random play, a scripted bot of the user's,
or a frozen snapshot of a trained policy.

Each acts for one seat at a time from that seat's flat observation (the trained policy's
form: the seat's observation with its legal-move mask as the last values) and mask, drawing
what it draws from the env's generator, so a match repeats from its seed.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import numpy as np
import torch

from hpcrl.components.import_paths import is_import_path, load
from hpcrl.errors import ConfigError
from hpcrl.league.opponents import RANDOM
from hpcrl.league.snapshots import Snapshot, load_snapshot, snapshots
from hpcrl.models.acting import make_engine
from hpcrl.trained.saved_policy import actor_from_saved


class Player(Protocol):
    """Chooses a legal move for the seat it plays."""

    def act(self, obs: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> int:
        """A move (its index) for flat observation ``obs`` with legal moves ``mask``."""
        ...


class RandomPlayer:
    """Uniform random play among the legal moves."""

    def act(self, obs: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> int:
        """A legal move, each equally likely."""
        legal = np.flatnonzero(mask)
        return int(legal[int(rng.integers(len(legal)))])


class SnapshotPlayer:
    """A frozen snapshot's actor, sampling its (masked) policy as the collectors act: through
    its acting engine (numpy for an MLP), from a uniform drawn from the env's generator."""

    def __init__(self, snap: Snapshot) -> None:
        self.name = snap.name
        self.actor = actor_from_saved(load_snapshot(snap))
        self.engine = make_engine(self.actor)

    def act(self, obs: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> int:
        """A move drawn from the snapshot's policy (illegal moves have probability 0)."""
        uniform = np.array([rng.random()], dtype=np.float32)
        with torch.no_grad():
            step = self.engine.step(np.asarray(obs, np.float32)[None], uniform)
        return int(step.actions[0])


def scripted_player(path: str) -> Player:
    """The user's bot ``module:Class``: made with no arguments, with a method ``act(obs,
    mask, rng) -> move``; refused with the fix when it is not one."""
    player = load(path, "env.league.eval_opponent")()
    if not callable(getattr(player, "act", None)):
        raise ConfigError(f"opponent '{path}' has no method act(obs, mask, rng); a scripted "
                          f"opponent is a class whose act returns a legal move")
    return player


class Players:
    """Players by name, made once each: ``random``, ``module:Class``, or a snapshot name
    (``<policy>-<env steps>``) of the league in ``league_dir``."""

    def __init__(self, league_dir: Path | None) -> None:
        self.league_dir = league_dir
        self._made: dict[str, Player] = {}

    def get(self, name: str) -> Player:
        """The player ``name``."""
        if name not in self._made:
            self._made[name] = self._make(name)
        return self._made[name]

    def _make(self, name: str) -> Player:
        if name == RANDOM:
            return RandomPlayer()
        if is_import_path(name):
            return scripted_player(name)
        known = {snap.name: snap for snap in snapshots(self.league_dir)} if self.league_dir else {}
        if name not in known:
            names = ", ".join(sorted(known)) or "none yet"
            raise ConfigError(f"opponent '{name}' is neither 'random', a 'module:Class' bot nor "
                              f"a snapshot of the league (snapshots: {names})")
        return SnapshotPlayer(known[name])


PlayerFactory = Callable[[str], Player]
