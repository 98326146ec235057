"""A rollout: what one collector gathered in ``T`` steps of its ``N`` envs.

All step data live in one contiguous buffer (``data``, float32 words) and the per-rollout
facts in one float64 array (``header``), so a rollout crosses processes as two buffers
without pickling. The named fields are numpy views into those arrays, each in its own
dtype (observations keep the carried dtype of the env's ``ObsFormat``).
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache

import numpy as np

from hpcrl.numerics.moments import MomentsRecord, moments_layout
from hpcrl.numerics.normalization import Moments
from hpcrl.numerics.records import (
    Field,
    Record,
    RecordLayout,
    attach_views,
    buffer_words,
    scalar_fields,
)

FACTS = ("valid_steps", "weights_version", "env_offset", "source", "seconds", "env_restarts",
         "env_failed")


class StreamFacts(Record):
    """What every streamed batch of experience (a rollout, a transition chunk) says of
    itself, float64 scalars: the acting weights' version, its first env's global index, the
    collector's id, the seconds spent on it, how many of its envs were made again
    after a failure while it was collected (:mod:`hpcrl.envs.restarts`), and whether an
    env failed for good while it was (1: its learner trains on none of it and the job
    stops, :mod:`hpcrl.placement.env_failures`)."""

    weights_version: np.ndarray
    env_offset: np.ndarray
    source: np.ndarray
    seconds: np.ndarray
    env_restarts: np.ndarray
    env_failed: np.ndarray


class RolloutHeader(StreamFacts):
    """A rollout's facts: the steps collected, :class:`StreamFacts`, and the normaliser
    moments of its raw observations and returns (a
    :class:`~hpcrl.numerics.moments.MomentsRecord`, the one packing of moments)."""

    valid_steps: np.ndarray
    moments: MomentsRecord


@cache
def header_layout(obs_dim: int) -> RecordLayout[RolloutHeader]:
    """The header of a rollout whose observations hold ``obs_dim`` values (one layout per
    size, made once)."""
    return RecordLayout([*scalar_fields(FACTS), ("moments", moments_layout(obs_dim))],
                        record_type=RolloutHeader)

@dataclass(frozen=True)
class RolloutLayout:
    """Shapes of a rollout; equal layouts give interchangeable buffers."""

    num_steps: int
    num_envs: int
    obs_shape: tuple[int, ...]
    action_shape: tuple[int, ...]
    obs_dtype: str = "float32"
    state_size: int = 0  # floats of a recurrent actor's state per env (0: feedforward)
    sequence_length: int = 0  # steps of the loss's sequences (recurrent; 0: num_steps)
    last_obs: bool = False  # holds the observation after the last step (RND's learner needs it)
    # integer actions (discrete, multi-discrete) as the learner indexes with them: int64, so
    # that it reads them in place
    action_dtype: str = "float32"

    @property
    def num_sequences(self) -> int:
        """Sequences per env: the rollout holds the recurrent state at each one's start."""
        return self.num_steps // (self.sequence_length or self.num_steps)

    def fields(self) -> Iterator[Field]:
        """Name, shape (and dtype, when not float32) of each step field, in buffer order."""
        tn = (self.num_steps, self.num_envs)
        yield "obs", tn + self.obs_shape, self.obs_dtype
        yield "actions", tn + self.action_shape, self.action_dtype
        for name in ("log_probs", "values", "rewards", "terminated", "truncated",
                     "next_values", "episode_returns", "episode_lengths"):
            yield name, tn
        if self.state_size:
            yield "memory", (self.num_sequences, self.num_envs, self.state_size)
        if self.last_obs:
            yield "last_obs", (self.num_envs,) + self.obs_shape, self.obs_dtype

    @property
    def data_size(self) -> int:
        """float32 words of the step buffer."""
        return buffer_words(self.fields())

    @property
    def obs_dim(self) -> int:
        """Values in one observation (the product of ``obs_shape``)."""
        return int(np.prod(self.obs_shape))

    @property
    def header_size(self) -> int:
        """float64 slots of the header (:func:`header_layout`: the facts, then the
        observation and return moments)."""
        return header_layout(self.obs_dim).words // 2

    def new(self, data: np.ndarray | None = None) -> Rollout:
        """A rollout of zeros; its step fields in ``data`` when given (float32 words, a
        region of shared memory say), else in a buffer of its own."""
        return Rollout(self, np.zeros(self.data_size, np.float32) if data is None else data,
                       np.zeros(self.header_size, np.float64))


class Rollout:
    """Step fields ``[T, N, ...]`` as views of ``data``; header facts as properties.

    ``next_values`` follows the contract of :func:`hpcrl.buffers.returns.gae`;
    ``episode_returns``/``episode_lengths`` hold the undiscounted return and length of an
    episode at the step that ended it (0 elsewhere, read them where ``terminated|truncated``).
    A recurrent actor's rollout also holds ``memory [num_sequences, N, state_size]``: the
    collector's state at the first step of each sequence (zero where an episode starts).
    A layout with ``last_obs`` also holds ``last_obs [N, ...]``: the observation that
    followed the last valid step, as the policy takes it (normalised when the run does).
    """

    obs: np.ndarray
    actions: np.ndarray
    log_probs: np.ndarray
    values: np.ndarray
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    next_values: np.ndarray
    episode_returns: np.ndarray
    episode_lengths: np.ndarray
    memory: np.ndarray
    last_obs: np.ndarray

    def __init__(self, layout: RolloutLayout, data: np.ndarray, header: np.ndarray) -> None:
        if data.size != layout.data_size or header.size != layout.header_size:
            raise ValueError("rollout buffers do not match the layout")
        self.layout, self.data, self.header = layout, data, header
        attach_views(self, layout.fields(), data)
        # the header's named fields: views of its float64 slots
        self.facts = header_layout(layout.obs_dim).wrap(header.view(np.float32))

    # -- header facts ------------------------------------------------------------------------
    @property
    def valid_steps(self) -> int:
        """Steps actually collected (fewer than ``num_steps`` when preempted)."""
        return int(self.facts.valid_steps)

    @property
    def weights_version(self) -> int:
        """Version of the weights that collected this rollout."""
        return int(self.facts.weights_version)

    @property
    def env_offset(self) -> int:
        """Global index of this rollout's first env."""
        return int(self.facts.env_offset)

    @property
    def source(self) -> int:
        """Id of the collector that produced it."""
        return int(self.facts.source)

    @property
    def collect_seconds(self) -> float:
        """Wall time the collector spent filling it."""
        return float(self.facts.seconds)

    @property
    def env_restarts(self) -> int:
        """Envs made again after a failure while it was collected."""
        return int(self.facts.env_restarts)

    def set_facts(self, valid_steps: int, weights_version: int, env_offset: int,
                  source: int, seconds: float = 0.0, env_restarts: int = 0) -> None:
        """Fill the header: the steps collected, the acting weights' version, the first env's
        global index, the collector's id, the seconds spent and the envs made again."""
        self.facts.set(valid_steps=valid_steps, weights_version=weights_version,
                       env_offset=env_offset, source=source, seconds=seconds,
                       env_restarts=env_restarts, env_failed=0.0)

    def set_moments(self, obs: Moments, ret: Moments) -> None:
        """Normaliser moments of the raw observations (``obs_shape`` arrays or flat) and of
        the returns (scalars)."""
        self.facts.moments.write((obs, ret))

    def moments(self) -> tuple[Moments, Moments]:
        """The moments :meth:`set_moments` stored, copies: the observations' as
        ``obs_shape`` arrays, the returns' as scalars."""
        obs, ret = self.facts.moments.read()
        shape = self.layout.obs_shape
        return Moments(obs.count, obs.mean.reshape(shape), obs.m2.reshape(shape)), ret

    def finished_episodes(self) -> tuple[np.ndarray, np.ndarray]:
        """Returns and lengths of the episodes that ended within the valid steps (a step that
        ended a life but not the game has length 0 and is none)."""
        t = self.valid_steps
        ended = ((self.terminated[:t] + self.truncated[:t]) > 0) & (self.episode_lengths[:t] > 0)
        return self.episode_returns[:t][ended], self.episode_lengths[:t][ended]
