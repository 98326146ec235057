"""A rollout: what one collector gathered in ``T`` steps of its ``N`` envs.

All step data live in one contiguous buffer (``data``, float32 words) and the per-rollout
facts in one float64 array (``header``), so a rollout crosses processes as two buffers
without pickling. The named fields are numpy views into those arrays, each in its own
dtype (observations keep the carried dtype of the env's ``ObsFormat``).
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

# header slots before the normaliser moments
_VALID, _VERSION, _OFFSET, _SOURCE, _SECONDS = range(5)
_FIXED = 5


Field = tuple  # (name, shape) or (name, shape, dtype); float32 when no dtype is given


def _field_parts(field: Field) -> tuple[str, tuple[int, ...], np.dtype]:
    name, shape = field[0], field[1]
    return name, shape, np.dtype(field[2] if len(field) > 2 else np.float32)


FieldSlice = tuple  # (name, first byte, end byte, dtype, shape) of one field in a buffer


def field_slices(fields: Iterator[Field]) -> tuple[FieldSlice, ...]:
    """Where each field lies in a buffer that holds ``fields`` back to back, each aligned to
    its item size (so a layout of float32 fields takes exactly their element count)."""
    slices, offset = [], 0
    for field in fields:
        name, shape, dtype = _field_parts(field)
        offset = -(-offset // dtype.itemsize) * dtype.itemsize
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        slices.append((name, offset, offset + nbytes, dtype, tuple(shape)))
        offset += nbytes
    return tuple(slices)


def slices_words(slices: tuple[FieldSlice, ...]) -> int:
    """float32 words of a buffer that holds the fields placed by :func:`field_slices`."""
    return -(-slices[-1][2] // 4) if slices else 0


def buffer_words(fields: Iterator[Field]) -> int:
    """float32 words of a buffer that holds ``fields`` (see :func:`field_slices`)."""
    return slices_words(field_slices(fields))


def attach_slices(owner: object, slices: tuple[FieldSlice, ...], data: np.ndarray) -> None:
    """Set ``owner.<name>`` to the view of ``data`` each slice of :func:`field_slices` says,
    shaped and typed as its field. ``data`` is a float32 buffer; a field of another dtype
    (integer observations, say) is a view of its bytes, so the whole message still crosses
    processes as one buffer."""
    raw = data.view(np.uint8)
    for name, first, end, dtype, shape in slices:
        setattr(owner, name, raw[first:end].view(dtype).reshape(shape))


def attach_views(owner: object, fields: Iterator[Field], data: np.ndarray) -> None:
    """:func:`attach_slices` for ``fields`` laid out by :func:`field_slices` (``data`` a
    float32 buffer of :func:`buffer_words` words)."""
    attach_slices(owner, field_slices(fields), data)


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

    @property
    def num_sequences(self) -> int:
        """Sequences per env: the rollout holds the recurrent state at each one's start."""
        return self.num_steps // (self.sequence_length or self.num_steps)

    def fields(self) -> Iterator[Field]:
        """Name, shape (and dtype, when not float32) of each step field, in buffer order."""
        tn = (self.num_steps, self.num_envs)
        yield "obs", tn + self.obs_shape, self.obs_dtype
        yield "actions", tn + self.action_shape
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
        """float64 slots of the header: the fixed facts, then the observation moments
        (count, mean and m2 of ``obs_dim`` each) and the return moments (count, mean, m2)."""
        # fixed slots, obs moments (count, mean, m2) and return moments (count, mean, m2)
        return _FIXED + 1 + 2 * self.obs_dim + 3

    def new(self, data: np.ndarray | None = None) -> Rollout:
        """A rollout of zeros; its step fields in ``data`` when given (float32 words, a
        region of shared memory say), else in a buffer of its own."""
        return Rollout(self, np.zeros(self.data_size, np.float32) if data is None else data,
                       np.zeros(self.header_size, np.float64))


class Rollout:
    """Step fields ``[T, N, ...]`` as views of ``data``; header facts as properties.

    ``next_values`` follows the contract of :func:`hpcrl.returns.gae`;
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

    # -- header facts ------------------------------------------------------------------------
    def _get(self, slot: int) -> int:
        return int(self.header[slot])

    @property
    def valid_steps(self) -> int:
        """Steps actually collected (fewer than ``num_steps`` when preempted)."""
        return self._get(_VALID)

    @property
    def weights_version(self) -> int:
        """Version of the weights that collected this rollout."""
        return self._get(_VERSION)

    @property
    def env_offset(self) -> int:
        """Global index of this rollout's first env."""
        return self._get(_OFFSET)

    @property
    def source(self) -> int:
        """Id of the collector that produced it."""
        return self._get(_SOURCE)

    @property
    def collect_seconds(self) -> float:
        """Wall time the collector spent filling it."""
        return float(self.header[_SECONDS])

    def set_facts(self, valid_steps: int, weights_version: int, env_offset: int,
                  source: int, seconds: float = 0.0) -> None:
        """Fill the header: the steps collected, the acting weights' version, the first env's
        global index, the collector's id and the seconds spent."""
        self.header[[_VALID, _VERSION, _OFFSET, _SOURCE, _SECONDS]] = (
            valid_steps, weights_version, env_offset, source, seconds)

    def _moment_views(self) -> tuple[np.ndarray, ...]:
        d, h = self.layout.obs_dim, self.header
        base = _FIXED
        return (h[base:base + 1], h[base + 1:base + 1 + d], h[base + 1 + d:base + 1 + 2 * d],
                h[base + 1 + 2 * d:base + 4 + 2 * d])

    def set_moments(self, obs: tuple[float, np.ndarray, np.ndarray],
                    ret: tuple[float, float, float]) -> None:
        """Normaliser moments ``(count, mean, m2)`` of raw observations and returns."""
        count, mean, m2, ret_view = self._moment_views()
        count[0] = obs[0]
        mean[:] = np.reshape(obs[1], -1)
        m2[:] = np.reshape(obs[2], -1)
        ret_view[:] = ret

    def moments(self) -> tuple[tuple[float, np.ndarray, np.ndarray], tuple[float, float, float]]:
        """The normaliser moments :meth:`set_moments` stored: ``(count, mean, m2)`` of the raw
        observations (``obs_shape`` arrays, copies) and of the returns."""
        count, mean, m2, ret_view = self._moment_views()
        shape = self.layout.obs_shape
        return ((float(count[0]), mean.reshape(shape).copy(), m2.reshape(shape).copy()),
                (float(ret_view[0]), float(ret_view[1]), float(ret_view[2])))

    def finished_episodes(self) -> tuple[np.ndarray, np.ndarray]:
        """Returns and lengths of the episodes that ended within the valid steps (a step that
        ended a life but not the game has length 0 and is none)."""
        t = self.valid_steps
        ended = ((self.terminated[:t] + self.truncated[:t]) > 0) & (self.episode_lengths[:t] > 0)
        return self.episode_returns[:t][ended], self.episode_lengths[:t][ended]
