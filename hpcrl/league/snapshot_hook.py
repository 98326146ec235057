"""When snapshots of the trained policy join the league: rank 0's hook at the run writer's
checkpoints (:class:`~hpcrl.learning.run_writer.IntervalHook`).

A snapshot joins every ``env.league.snapshot_every`` env steps (at the first update past
each multiple) and, with ``env.league.win_threshold``, as soon as the trained policy has won
that fraction of its last ``env.league.threshold_matches`` matches since the newest snapshot
(read from the match log: real outcomes of whole matches). The writer checkpoints there and
the hook publishes the checkpoint's policy as ``<player>-<env steps>`` (``env.league.player``,
``main`` by default). With ``env.league.reset_fraction`` it then asks, with that probability
(drawn from the player's name and the env steps: the same on a resume), for the run to go
back to its initial weights (AlphaStar's exploiters): the run's roles end after that update
and its caller resets the checkpoint (:func:`~hpcrl.league.resets.reset_checkpoint`).

On a resume the snapshots taken after the checkpoint are removed first (the updates that made
them are trained again and publish them again), and the threshold's count of recent matches
comes back from the checkpoint (:meth:`SnapshotHook.state`, with how far each match log was
read, which the envs cut back to the same place): the league then grows exactly as in a run
that was never stopped, by the periodic schedule and by the threshold alike. In a league of
several trained policies each counts its own matches and removes only its own snapshots.
"""
from __future__ import annotations

import random
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hpcrl.envs.multiagent.matches import DRAW, WIN
from hpcrl.league.match_log import match_dir
from hpcrl.league.snapshots import drop_after, publish, snapshots
from hpcrl.runtime.checkpoint import load_checkpoint
from hpcrl.sections.league_section import LeagueConfig


class SnapshotHook:
    """Publishes snapshots of the trained policy (see the module)."""

    def __init__(self, league_dir: Path, config: LeagueConfig, start_env_steps: int = 0,
                 state: dict[str, Any] | None = None, checkpoint: Path | None = None) -> None:
        self.league_dir = Path(league_dir)
        self.config = config
        self.player = config.player
        self.reset_due = False  # the last snapshot asked the run to go back to its start
        self.reset_at = 0  # the env steps of that snapshot
        drop_after(self.league_dir, start_env_steps, self.player)
        every = config.snapshot_every
        self.next_at = (start_env_steps // every + 1) * every if every > 0 else None
        self.recent: deque[float] = deque(maxlen=max(1, config.threshold_matches))
        self._offsets: dict[Path, int] = {}
        if checkpoint is not None:
            publish_missed(self.league_dir, config, start_env_steps, state, checkpoint)
        if state is not None:  # a resume: the recent matches and where the logs were read
            folder = match_dir(self.league_dir)
            self._offsets = {folder / name: int(at) for name, at in state["offsets"].items()}
            self.recent.extend(float(x) for x in state["recent"])
            return
        self._read_new()  # matches before this start do not count towards the threshold
        self.recent.clear()

    def state(self, env_steps: int) -> dict[str, Any]:
        """The recent matches' outcomes and how far each match log was read, as they will be
        after a checkpoint at ``env_steps`` (none recent when a snapshot joins there): a
        resume from it counts towards the win threshold exactly as a run never stopped."""
        joins = self.due(env_steps)
        self._read_new()
        return {"recent": [] if joins else list(self.recent), "joins": joins,
                "offsets": {path.name: at for path, at in self._offsets.items()}}

    def due(self, env_steps: int) -> bool:
        """Whether a snapshot joins at ``env_steps``."""
        if self.next_at is not None and env_steps >= self.next_at:
            return True
        threshold = self.config.win_threshold
        if threshold <= 0:
            return False
        self._read_new()
        full = len(self.recent) == self.recent.maxlen
        return full and sum(self.recent) / len(self.recent) >= threshold

    def after_checkpoint(self, checkpoint: Path, env_steps: int, row: Mapping[str, Any],
                         final: bool) -> bool:
        """Publish the checkpoint's policy as a snapshot; asks for a reload (True) when the
        trained policy is to go back to its initial weights (``env.league.reset_fraction``)."""
        record = load_checkpoint(checkpoint)["policy"]
        publish(self.league_dir, self.player, env_steps, record)
        every = self.config.snapshot_every
        if every > 0:
            self.next_at = (env_steps // every + 1) * every
        self._read_new()
        self.recent.clear()  # the threshold counts matches against the new league
        self.reset_due = reset_drawn(self.config, env_steps) and not final
        self.reset_at = env_steps
        return self.reset_due

    def _read_new(self) -> None:
        """Add the matches logged since the last read to the recent outcomes."""
        folder = match_dir(self.league_dir)
        if not folder.is_dir():
            return
        for path in sorted(folder.glob("env-*.csv")):
            offset = self._offsets.get(path, 0)
            with path.open() as src:
                src.seek(offset)
                text = src.read()
            complete = text.rfind("\n") + 1  # a line being written is read next time
            self._offsets[path] = offset + len(text[:complete].encode())
            for line in text[:complete].splitlines():
                cells = line.split(",")
                if (len(cells) < 9 or cells[0] == "wall_time" or not cells[8]
                        or cells[4] != self.player):  # (another policy's match)
                    continue
                self.recent.append(1.0 if cells[8] == WIN else 0.5 if cells[8] == DRAW else 0.0)


def reset_drawn(config: LeagueConfig, env_steps: int) -> bool:
    """Whether the snapshot of ``config.player`` at ``env_steps`` sends it back to its
    initial weights (``env.league.reset_fraction``): a draw from the player's name and the
    env steps, so a resume draws the same."""
    draw = random.Random(f"hpcrl-league-reset/{config.player}/{env_steps}").random()
    return config.reset_fraction > 0 and draw < config.reset_fraction


def publish_missed(league_dir: Path, config: LeagueConfig, env_steps: int,
                   state: dict[str, Any] | None, checkpoint: Path) -> bool:
    """A resume from the checkpoint at ``env_steps`` that a stop signal wrote where a
    snapshot of ``config.player`` was due (a stop publishes none; ``state``: the hook's in
    that checkpoint): publish it now from that checkpoint, the weights the run never stopped
    published there. Whether it was published."""
    own = [snap.env_steps for snap in snapshots(league_dir) if snap.policy == config.player]
    if env_steps <= 0 or env_steps in own:
        return False
    if state is not None:
        due = bool(state.get("joins"))
    else:  # (a checkpoint from before the hook kept its state: the periodic schedule)
        every = config.snapshot_every
        due = every > 0 and env_steps >= (max(own, default=0) // every + 1) * every
    if due:
        publish(league_dir, config.player, env_steps, load_checkpoint(checkpoint)["policy"])
    return due
