"""A chunk of transitions, collector -> replay, backed by two flat buffers.

Like :class:`~hpcrl.buffers.rollout.Rollout`, all rows live in one contiguous float32 array
(``data``) and the chunk's facts in one float64 array (``header``), so a chunk crosses
processes as two buffers without pickling. Rows are independent (n-step) transitions: any
number of collectors can append chunks to one replay.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from hpcrl.buffers.rollout import StreamFacts
from hpcrl.numerics.records import Field, RecordLayout, attach_views, buffer_words, scalar_fields


class ChunkHeader(StreamFacts):
    """A chunk's facts: the rows and episodes it holds, the env steps it stands for, and
    :class:`~hpcrl.buffers.rollout.StreamFacts`."""

    count: np.ndarray
    episodes: np.ndarray
    env_steps: np.ndarray


HEADER = RecordLayout(scalar_fields(("count", "weights_version", "env_offset", "source",
                                     "episodes", "env_steps", "seconds", "env_restarts",
                                     "env_failed")),
                      record_type=ChunkHeader)
_HEADER = HEADER.words // 2  # float64 slots


@dataclass(frozen=True)
class TransitionLayout:
    """Shapes of a chunk: at most ``capacity`` rows of one observation and action shape,
    with an initial replay priority per row when ``priorities`` is set, and each row's
    global env index and episode end when ``streams`` is (what hindsight replay needs to
    find a row's episode)."""

    capacity: int
    obs_shape: tuple[int, ...]
    action_shape: tuple[int, ...]
    priorities: bool = False
    obs_dtype: str = "float32"
    streams: bool = False

    def fields(self) -> Iterator[Field]:
        """Name, shape (and dtype, when not float32) of each row field, in buffer order."""
        c = (self.capacity,)
        yield "obs", c + self.obs_shape, self.obs_dtype
        yield "actions", c + self.action_shape
        yield "rewards", c
        yield "discounts", c
        yield "next_obs", c + self.obs_shape, self.obs_dtype
        yield "episode_returns", c
        yield "episode_lengths", c
        if self.priorities:
            yield "priorities", c
        if self.streams:
            yield "env_ids", c
            yield "ends", c

    @property
    def data_size(self) -> int:
        """float32 words of the row buffer."""
        return buffer_words(self.fields())

    def new(self, data: np.ndarray | None = None) -> Transitions:
        """An empty chunk; its rows in ``data`` when given (float32 words, a region of
        shared memory say), else in a buffer of its own."""
        return Transitions(self, np.zeros(self.data_size, np.float32) if data is None else data,
                           np.zeros(_HEADER, np.float64))


class Transitions:
    """Rows ``[capacity, ...]`` as views of ``data``; the first :attr:`count` are valid.

    A row is ``(obs, action, reward, discount, next_obs)`` with the n-step meaning of
    :func:`hpcrl.buffers.returns.nstep`: the target of ``Q(obs, action)`` is
    ``reward + discount * V(next_obs)`` (``discount`` is 0 after a termination).
    Actions are stored as float32: Discrete indices, or Box actions in the policy's
    ``[-1, 1]`` space. ``episode_returns[:episodes]`` / ``episode_lengths[:episodes]`` list
    the undiscounted returns and lengths of the episodes that ended in this chunk, and
    ``priorities[:count]`` (if the layout has them) the rows' initial replay priorities;
    ``env_ids[:count]`` and ``ends[:count]`` (if the layout has ``streams``) the global
    index of each row's env and 1 where its episode ended (terminated or truncated).
    """

    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    discounts: np.ndarray
    next_obs: np.ndarray
    episode_returns: np.ndarray
    episode_lengths: np.ndarray
    priorities: np.ndarray  # only when the layout has them
    env_ids: np.ndarray  # only when the layout has streams
    ends: np.ndarray  # only when the layout has streams

    def __init__(self, layout: TransitionLayout, data: np.ndarray, header: np.ndarray) -> None:
        if data.size != layout.data_size or header.size != _HEADER:
            raise ValueError("transition buffers do not match the layout")
        self.layout, self.data, self.header = layout, data, header
        self.facts = HEADER.wrap(header.view(np.float32))  # named views of the header
        attach_views(self, layout.fields(), data)

    @property
    def count(self) -> int:
        """Valid rows."""
        return int(self.facts.count)

    @property
    def weights_version(self) -> int:
        """Version of the policy that acted."""
        return int(self.facts.weights_version)

    @property
    def env_offset(self) -> int:
        """Global index of the collector's first env."""
        return int(self.facts.env_offset)

    @property
    def source(self) -> int:
        """Id of the collector that produced the chunk."""
        return int(self.facts.source)

    @property
    def episodes(self) -> int:
        """Episodes that ended in this chunk."""
        return int(self.facts.episodes)

    @property
    def env_steps(self) -> int:
        """Env steps taken (over all the collector's envs) to produce the chunk."""
        return int(self.facts.env_steps)

    @property
    def collect_seconds(self) -> float:
        """Wall time the collector spent on the chunk."""
        return float(self.facts.seconds)

    @property
    def env_restarts(self) -> int:
        """Envs made again after a failure while the chunk was collected."""
        return int(self.facts.env_restarts)

    def reset(self) -> None:
        """Empty the chunk (before a collector fills it again)."""
        self.header[:] = 0.0

    def set_facts(self, weights_version: int, env_offset: int, source: int, env_steps: int,
                  seconds: float, env_restarts: int = 0) -> None:
        """Fill the header: the acting policy's version, the first env's global index, the
        collector's id, the env steps taken, the seconds spent on the chunk and the envs
        made again meanwhile."""
        self.facts.set(weights_version=weights_version, env_offset=env_offset, source=source,
                       env_steps=env_steps, seconds=seconds, env_restarts=env_restarts,
                       env_failed=0.0)

    def append(self, obs: np.ndarray, actions: np.ndarray, rewards: np.ndarray,
               discounts: np.ndarray, next_obs: np.ndarray,
               env_ids: np.ndarray | None = None, ends: np.ndarray | None = None
               ) -> None:
        """Add rows after the valid ones (raises when the chunk is full); ``env_ids`` and
        ``ends`` are required by a layout with ``streams`` and ignored otherwise."""
        start, k = self.count, len(rewards)
        if start + k > self.layout.capacity:
            raise ValueError(f"transition chunk of capacity {self.layout.capacity} cannot take "
                             f"{start + k} rows")
        end = start + k
        self.obs[start:end] = obs
        self.actions[start:end] = actions
        self.rewards[start:end] = rewards
        self.discounts[start:end] = discounts
        self.next_obs[start:end] = next_obs
        if self.layout.streams:
            if env_ids is None or ends is None:
                raise ValueError("this chunk's layout has streams: append needs env_ids and "
                                 "ends")
            self.env_ids[start:end] = env_ids
            self.ends[start:end] = ends
        self.facts.count[...] = end  # per collected step: the view itself, no name lookup

    def add_episodes(self, returns: np.ndarray, lengths: np.ndarray) -> None:
        """Record finished episodes."""
        start = self.episodes
        end = start + len(returns)
        self.episode_returns[start:end] = returns
        self.episode_lengths[start:end] = lengths
        self.facts.episodes[...] = end

    def finished_episodes(self) -> tuple[np.ndarray, np.ndarray]:
        """Returns and lengths of the episodes that ended in this chunk."""
        k = self.episodes
        return self.episode_returns[:k], self.episode_lengths[:k]
