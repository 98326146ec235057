"""Hindsight experience replay (Andrychowicz et al. 2017), relabelled at sampling time.

A sparse goal task rewards almost nothing an untrained agent does; HER turns each failure
into a success at *some* goal: a transition replayed with a goal the same episode achieved
later carries the reward the env would have given for that goal. The learner's replay
does it as it samples, so the stored transitions stay the env's own:

- rows are kept per env *stream* (one ring of ``capacity // streams`` rows per env of the
  job, env ``s``'s step ``t`` in slot ``t mod C``), so the steps of an episode are
  consecutive in their stream whatever the collectors interleave. Collectors tag each row
  with its global env index and whether the episode ended there
  (:class:`~hpcrl.buffers.replay.transitions.TransitionLayout` ``streams``);
- each row knows the step its episode began at and, once it ended, its last step
  (``ep_first``, ``ep_last``, -1 while the episode runs);
- a batch is drawn uniformly from every stored row, as plain replay draws. The first
  ``int(batch_size * k / (k + 1))`` rows get a new desired goal, the ``achieved_goal`` of
  the next observation at a step ``t'`` of the row's episode, with ``t`` the row's step:
  ``future`` draws ``t'`` uniformly from ``[t, last]`` (inclusive, as Stable-Baselines3:
  the row's own outcome can be its goal), ``final`` takes ``t' = last``, ``episode`` draws
  from ``[first, last]``. Their reward is the env's ``compute_reward(next achieved goal,
  new goal)`` (:class:`~hpcrl.buffers.replay.goals.GoalRewards`), and, where the env defines
  ``compute_terminated``, their discount is 0 where it says the new goal ends the episode
  (else the stored discount stands: goal envs end episodes by truncation).

Episodes that are still running, or whose first steps the ring overwrote, are handled
explicitly rather than dropped: ``last`` is the episode's last step when it ended and the
stream's newest step while it runs (goals achieved so far: ``final`` is then the latest
outcome), and ``episode`` draws only from the steps still held (``first`` raised to the
oldest step of the stream's ring). Stable-Baselines3 instead samples only from finished
episodes and forgets an episode once the ring starts overwriting it; here every stored
row is replayed, so no real transition is lost to the bookkeeping.

Everything a resumed run needs to relabel the same way (the streams' step counters, every
row's episode bounds, the sampling generator) is part of the checkpoint.
"""
from __future__ import annotations

from typing import Any, Literal

import numpy as np
import torch

from hpcrl.buffers.replay.buffer import ReplayBatch, ReplayBuffer
from hpcrl.buffers.replay.goals import GoalCodec, GoalRewards
from hpcrl.buffers.replay.obs_store import DenseObsStore
from hpcrl.buffers.replay.transitions import Transitions
from hpcrl.envs.obs_format import ObsFormat
from hpcrl.envs.state import to_plain

Strategy = Literal["future", "final", "episode"]
STRATEGIES = ("future", "final", "episode")


class HerReplayBuffer(ReplayBuffer):
    """Transitions of ``streams`` env streams whose goals are relabelled as they are sampled.

    ``capacity`` is shared equally by the streams (``capacity // streams`` rows each);
    ``k`` relabelled goals per real transition; ``gamma`` is the discount a relabelled row
    keeps where ``goals`` says its new goal does not end the episode.
    """

    def __init__(self, capacity: int, obs_format: ObsFormat, action_shape: tuple[int, ...],
                 seed: int, streams: int, strategy: Strategy, k: int, gamma: float,
                 goals: GoalRewards) -> None:
        if strategy not in STRATEGIES:
            raise ValueError(f"HER strategy must be one of {STRATEGIES}, got {strategy!r}")
        per_stream = capacity // streams
        if per_stream < 1:
            raise ValueError(f"a hindsight replay of {capacity} rows cannot hold {streams} "
                             f"env streams")
        super().__init__(per_stream * streams, obs_format.shape, action_shape, False, seed,
                         obs_format.dtype)
        assert isinstance(self.observations, DenseObsStore)  # Dict rows are 1-D bytes
        self.streams, self.per_stream = streams, per_stream
        self.strategy, self.k, self.gamma = strategy, k, gamma
        self.codec, self.goals = GoalCodec(obs_format), goals
        self.written = np.zeros(streams, np.int64)  # steps each stream stored so far
        self.current_first = np.zeros(streams, np.int64)  # where its running episode began
        self.ep_first = np.zeros(self.capacity, np.int64)
        self.ep_last = np.full(self.capacity, -1, np.int64)

    # -- where rows live ---------------------------------------------------------------------
    def rows_of(self, stream: np.ndarray | int, step: np.ndarray | int) -> np.ndarray:
        """Flat rows of ``stream``'s steps ``step`` (which must still be held)."""
        return (np.asarray(step) % self.per_stream) * self.streams + np.asarray(stream)

    def held(self) -> np.ndarray:
        """Rows each stream holds (its newest ``min(written, capacity // streams)`` steps)."""
        return np.minimum(self.written, self.per_stream)

    def nbytes(self) -> int:
        """Bytes this replay holds: the rows, and every row's episode bounds."""
        return super().nbytes() + self.ep_first.nbytes + self.ep_last.nbytes

    # -- writing -----------------------------------------------------------------------------
    def add(self, chunk: Transitions) -> np.ndarray:
        """Append a chunk's rows to their streams (the chunk must carry ``env_ids`` and
        ``ends``); returns the rows written, in the chunk's order."""
        if not chunk.layout.streams:
            raise ValueError("a hindsight replay needs chunks that name each row's env and "
                             "episode end (TransitionLayout.streams)")
        k = chunk.count
        envs = chunk.env_ids[:k].astype(np.int64)
        flags = np.rint(chunk.ends[:k]).astype(np.int64)  # 1: ended; 2: starts after a cut
        ends, after_cut = (flags & 1) > 0, (flags & 2) > 0
        rows = np.empty(k, np.int64)
        for stream in np.unique(envs):
            sel = np.flatnonzero(envs == stream)
            rows[sel] = self.add_stream(int(stream), chunk.obs[sel], chunk.actions[sel],
                                        chunk.rewards[sel], chunk.discounts[sel],
                                        chunk.next_obs[sel], ends[sel], after_cut[sel])
        return rows

    def add_rows(self, *args: Any, **kwargs: Any) -> np.ndarray:
        """Refused: rows without their env stream cannot be placed in an episode."""
        raise TypeError("a hindsight replay takes rows with their env stream and episode "
                        "ends: use add(chunk) or add_stream(...)")

    def add_stream(self, stream: int, obs: np.ndarray, actions: np.ndarray,
                   rewards: np.ndarray, discounts: np.ndarray, next_obs: np.ndarray,
                   ends: np.ndarray, after_cut: np.ndarray | None = None) -> np.ndarray:
        """Append consecutive steps of env ``stream`` (``ends[i]``: its episode ended at step
        ``i``, by termination or truncation; ``after_cut[i]``: step ``i`` starts an episode
        after one a failure cut, whose last step gave no row: that episode ends at the step
        before); returns the rows written."""
        if not 0 <= stream < self.streams:
            raise ValueError(f"env stream {stream} outside the replay's {self.streams} "
                             f"streams: the job's env count changed")
        if after_cut is not None and after_cut.any():
            ends = ends.copy()
            ends[:-1] |= after_cut[1:]  # the row before a restart ends its episode
            if after_cut[0]:
                self._end_running(stream)
        n, c = len(rewards), self.per_stream
        steps = self.written[stream] + np.arange(n)
        starts = np.zeros(n, bool)
        starts[1:] = ends[:-1]
        firsts = np.maximum.accumulate(np.where(starts, steps, self.current_first[stream]))
        never = np.iinfo(np.int64).max
        lasts = np.minimum.accumulate(np.where(ends, steps, never)[::-1])[::-1]
        lasts = np.where(lasts == never, -1, lasts)
        keep = slice(max(n - c, 0), n)  # a stream holds its newest c steps
        rows = self.rows_of(stream, steps)
        kept = rows[keep]
        self.observations.write(kept, obs[keep], next_obs[keep])
        self.actions[kept] = actions[keep]
        self.rewards[kept] = rewards[keep]
        self.discounts[kept] = discounts[keep]
        self.ep_first[kept] = firsts[keep]
        self.ep_last[kept] = lasts[keep]
        before = self.written[stream]
        self.written[stream] += n
        if ends.any():
            # the episode running before this chunk ended in it: close its earlier steps
            oldest = max(int(self.current_first[stream]), int(self.written[stream]) - c)
            if oldest < before:
                self.ep_last[self.rows_of(stream, np.arange(oldest, before))] = lasts[0]
            self.current_first[stream] = steps[np.flatnonzero(ends)[-1]] + 1
        self.size = int(self.held().sum())
        return rows

    def _end_running(self, stream: int) -> None:
        """The episode ``stream`` was running ended with the last step it stored (a failure
        cut it): its steps are closed there, and the next step starts an episode."""
        written = int(self.written[stream])
        oldest = max(int(self.current_first[stream]), written - self.per_stream)
        if oldest < written:
            self.ep_last[self.rows_of(stream, np.arange(oldest, written))] = written - 1
        self.current_first[stream] = written

    # -- sampling ----------------------------------------------------------------------------
    def sample(self, batch_size: int, beta: float = 1.0) -> ReplayBatch:
        """``batch_size`` rows drawn uniformly with replacement, the first
        ``int(batch_size * k / (k + 1))`` of them relabelled (``beta`` is unused)."""
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        held = self.held()
        ends = np.cumsum(held)
        u = self.rng.integers(0, ends[-1], batch_size)
        streams = np.searchsorted(ends, u, side="right")
        steps = self.written[streams] - ends[streams] + u  # oldest held step + offset
        rows = self.rows_of(streams, steps)
        tensors = self._gather(rows)
        virtual = int(batch_size * self.k / (self.k + 1))
        if virtual:
            self._relabel(streams[:virtual], steps[:virtual], rows[:virtual], virtual)
        return ReplayBatch(**tensors, weights=None, indices=rows)

    def goal_steps(self, streams: np.ndarray, steps: np.ndarray) -> np.ndarray:
        """The step whose next observation's achieved goal becomes the new goal of each
        row (stream ``streams[i]``, step ``steps[i]``), by the strategy."""
        rows = self.rows_of(streams, steps)
        last = np.where(self.ep_last[rows] >= 0, self.ep_last[rows],
                        self.written[streams] - 1)
        if self.strategy == "final":
            return last
        if self.strategy == "future":
            return self.rng.integers(steps, last + 1)
        oldest = np.maximum(self.ep_first[rows], self.written[streams] - self.per_stream)
        return self.rng.integers(oldest, last + 1)

    def _relabel(self, streams: np.ndarray, steps: np.ndarray, rows: np.ndarray,
                 n: int) -> None:
        """Give the first ``n`` rows of the gathered batch new goals, rewards and
        discounts, in place."""
        goal_rows = self.rows_of(streams, self.goal_steps(streams, steps))
        store = self.observations
        # HER's Dict observations are packed into flat rows, which make_obs_store keeps dense
        # (shared frames are for [k, H, W] uint8 images only)
        assert isinstance(store, DenseObsStore)
        goals = self.codec.read(store.next_obs[goal_rows], "achieved_goal")
        obs, next_obs = self._out["obs"][:n], self._out["next_obs"][:n]
        self.codec.write(obs, "desired_goal", goals)
        self.codec.write(next_obs, "desired_goal", goals)
        achieved = self.codec.read(next_obs, "achieved_goal")
        self._out["rewards"][:n] = self.goals.rewards(achieved, goals)
        if self.goals.defines_termination:
            ended = self.goals.terminated(achieved, goals)
            self._out["discounts"][:n] = np.where(ended, 0.0, self.gamma)

    # -- checkpoints -------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The held rows, every row's episode bounds and the streams' counters."""
        n = int(self.held().max(initial=0)) * self.streams  # slots below the fullest ring
        state: dict[str, Any] = {"pos": 0, "size": self.size, "rng": to_plain(self.rng)}
        state.update(self._rows_state(n))
        state["her"] = {"streams": self.streams, "per_stream": self.per_stream, "rows": n,
                        "written": torch.from_numpy(self.written.copy()),
                        "current_first": torch.from_numpy(self.current_first.copy()),
                        "ep_first": torch.from_numpy(self.ep_first[:n].copy()),
                        "ep_last": torch.from_numpy(self.ep_last[:n].copy())}
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`; a plain replay's checkpoint, or one of another stream
        layout (env count or ``replay.buffer_size`` changed), raises ValueError."""
        her = state.get("her")
        if her is None:
            raise ValueError("checkpoint holds a plain replay; replay.her_strategy changed "
                             "since it was written (resume with replay.her_strategy=none)")
        if (her["streams"], her["per_stream"]) != (self.streams, self.per_stream):
            raise ValueError(f"checkpoint holds a hindsight replay of {her['streams']} env "
                             f"streams x {her['per_stream']} rows, this run has "
                             f"{self.streams} x {self.per_stream}: the job's env count or "
                             f"replay.buffer_size changed")
        n = int(her["rows"])
        self._load_rows(state, n)
        self.written[:] = her["written"].numpy()
        self.current_first[:] = her["current_first"].numpy()
        self.ep_first[:n] = her["ep_first"].numpy()
        self.ep_last[:n] = her["ep_last"].numpy()
        self.size = int(state["size"])
