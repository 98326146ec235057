"""Where a replay keeps the observations of its rows: as they are, or as shared frames.

A row holds an observation and the observation its n-step target starts from. Stored as
they are (:class:`DenseObsStore`), an Atari row costs two stacks of four 84x84 frames
(56 KB), although consecutive rows share all but one frame: row ``t`` stacks frames
``t-3..t`` and its target ``t+n-3..t+n``, which row ``t+n`` stacks again. A
:class:`FrameObsStore` keeps each distinct frame once, in a pool, and a row keeps the pool
slots of its planes: about one new frame per transition, so 1M Atari transitions take
6.8 GB where the dense store would take 52.6 GB (``benchmarks/replay_memory.py``). Frames
are matched by content (a hash, then a full comparison), so nothing about the envs' order,
episode ends or the n-step horizon needs to be known, and a row gathers back exactly what
was written.

:func:`make_obs_store` picks the frame store for stacked integer images (``uint8``
``[k, H, W]``) and the dense one for everything else.
"""
from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import torch

BLOCK = 1 << 14  # most frames per pool block: the pool grows by blocks as frames come


class ObsStore(Protocol):
    """The observation part of a replay of ``capacity`` rows."""

    def write(self, where: Any, obs: np.ndarray, next_obs: np.ndarray) -> None:
        """Store rows ``where`` (a slice or row indices), replacing what they held."""
        ...

    def gather(self, indices: np.ndarray, obs: np.ndarray, next_obs: np.ndarray) -> None:
        """Write rows ``indices`` into ``obs`` and ``next_obs`` (``[B, *obs_shape]``)."""
        ...

    def state_dict(self, size: int) -> dict[str, torch.Tensor]:
        """Rows ``[0, size)`` for a checkpoint."""
        ...

    def load_state_dict(self, state: dict[str, Any], size: int) -> None:
        """Rows ``[0, size)`` from :meth:`state_dict`."""
        ...

    def nbytes(self) -> int:
        """Bytes held for observations."""
        ...


class DenseObsStore:
    """Both observations of every row, as they are."""

    def __init__(self, capacity: int, obs_shape: tuple[int, ...], dtype: str) -> None:
        self.obs = np.zeros((capacity,) + obs_shape, dtype)
        self.next_obs = np.zeros_like(self.obs)

    def write(self, where: Any, obs: np.ndarray, next_obs: np.ndarray) -> None:
        """Copy both observations into rows ``where``."""
        self.obs[where] = obs
        self.next_obs[where] = next_obs

    def gather(self, indices: np.ndarray, obs: np.ndarray, next_obs: np.ndarray) -> None:
        """Copy rows ``indices`` into ``obs`` and ``next_obs``."""
        np.take(self.obs, indices, axis=0, out=obs)
        np.take(self.next_obs, indices, axis=0, out=next_obs)

    def state_dict(self, size: int) -> dict[str, torch.Tensor]:
        """Both observations of rows ``[0, size)`` (copies)."""
        return {"obs": torch.from_numpy(self.obs[:size].copy()),
                "next_obs": torch.from_numpy(self.next_obs[:size].copy())}

    def load_state_dict(self, state: dict[str, Any], size: int) -> None:
        """Rows ``[0, size)`` from :meth:`state_dict`; a checkpoint of shared frames raises
        ValueError."""
        if "obs" not in state:
            raise ValueError("checkpoint holds a replay of shared frames, this run stores "
                             "observations whole; resume with the run's env settings")
        self.obs[:size] = state["obs"].numpy()
        self.next_obs[:size] = state["next_obs"].numpy()

    def nbytes(self) -> int:
        """Bytes of both observation arrays."""
        return self.obs.nbytes + self.next_obs.nbytes


def pool_block(capacity: int) -> int:
    """Frames per pool block for a replay of ``capacity`` rows (a small replay grows by
    small blocks; a large one by :data:`BLOCK`)."""
    return int(min(BLOCK, max(64, capacity // 4)))


class FramePool:
    """Distinct frames, each stored once and counted by the rows that use it.

    Slot ``s`` lives in block ``s // block``; blocks are allocated as the number of live
    distinct frames grows, and freed slots are reused first, so the pool holds what the
    rows need and never moves a stored frame.
    """

    def __init__(self, frame_shape: tuple[int, ...], dtype: str, block: int = BLOCK) -> None:
        self.frame_shape, self.dtype = frame_shape, np.dtype(dtype)
        self.block = block
        self.blocks: list[np.ndarray] = []
        self.refs = np.zeros(0, np.int64)
        self.keys: list[Any] = []
        self.index: dict[Any, list[int]] = {}
        self.free: list[int] = []

    @property
    def live(self) -> int:
        """Frames held by at least one row."""
        return int(np.count_nonzero(self.refs))

    def _grow(self) -> None:
        n = self.block
        start = len(self.blocks) * n
        self.blocks.append(np.zeros((n,) + self.frame_shape, self.dtype))
        self.refs = np.concatenate([self.refs, np.zeros(n, np.int64)])
        self.keys.extend([None] * n)
        self.free.extend(range(start + n - 1, start - 1, -1))  # lowest slot first

    def frame(self, slot: int) -> np.ndarray:
        """The stored frame of ``slot`` (a view)."""
        return self.blocks[slot // self.block][slot % self.block]

    def put(self, frame: np.ndarray) -> int:
        """The slot holding ``frame`` (stored now if no live slot holds it), one more
        reference counted."""
        data = frame.tobytes()
        key = hash(data)
        for slot in self.index.get(key, ()):
            if self.frame(slot).tobytes() == data:
                self.refs[slot] += 1
                return slot
        if not self.free:
            self._grow()
        slot = self.free.pop()
        self.frame(slot)[...] = frame
        self.refs[slot] = 1
        self.keys[slot] = key
        self.index.setdefault(key, []).append(slot)
        return slot

    def release(self, slots: np.ndarray) -> None:
        """One reference fewer on each of ``slots`` (negative: none); a frame no row uses
        any more gives its slot back."""
        for slot in slots.tolist():
            if slot < 0:
                continue
            self.refs[slot] -= 1
            if self.refs[slot] == 0:
                key = self.keys[slot]
                same = self.index[key]
                same.remove(slot)
                if not same:
                    del self.index[key]
                self.keys[slot] = None
                self.free.append(slot)

    def gather(self, slots: np.ndarray, out: np.ndarray) -> None:
        """``out[i] = frame(slots[i])`` for a flat array of slots."""
        if len(self.blocks) == 1:
            np.take(self.blocks[0], slots, axis=0, out=out)
            return
        block, offset = np.divmod(slots, self.block)
        for b in np.unique(block).tolist():
            mask = block == b
            out[mask] = self.blocks[b][offset[mask]]

    def nbytes(self) -> int:
        """Bytes of the frame blocks and reference counts."""
        return sum(b.nbytes for b in self.blocks) + self.refs.nbytes


class FrameObsStore:
    """Observations ``[k, H, W]`` kept as ``k`` references each into a :class:`FramePool`."""

    def __init__(self, capacity: int, obs_shape: tuple[int, ...], dtype: str) -> None:
        self.obs_shape = obs_shape
        self.planes = obs_shape[0]
        self.pool = FramePool(obs_shape[1:], dtype, pool_block(capacity))
        self.obs_slots = np.full((capacity, self.planes), -1, np.int64)
        self.next_slots = np.full((capacity, self.planes), -1, np.int64)

    def write(self, where: Any, obs: np.ndarray, next_obs: np.ndarray) -> None:
        """Store rows ``where``: each plane put into the pool (shared when already there), the
        rows' old frames released afterwards."""
        rows = np.arange(len(self.obs_slots))[where]
        pool = self.pool
        for i, row in enumerate(rows.tolist()):
            new_obs = [pool.put(plane) for plane in obs[i]]
            new_next = [pool.put(plane) for plane in next_obs[i]]
            pool.release(self.obs_slots[row])  # after the puts: shared frames stay put
            pool.release(self.next_slots[row])
            self.obs_slots[row] = new_obs
            self.next_slots[row] = new_next

    def gather(self, indices: np.ndarray, obs: np.ndarray, next_obs: np.ndarray) -> None:
        """Rebuild rows ``indices`` into ``obs`` and ``next_obs`` from their planes' slots."""
        b = len(indices)
        flat = (b * self.planes,) + self.obs_shape[1:]
        self.pool.gather(self.obs_slots[indices].reshape(-1), obs.reshape(flat))
        self.pool.gather(self.next_slots[indices].reshape(-1), next_obs.reshape(flat))

    def state_dict(self, size: int) -> dict[str, torch.Tensor]:
        """The live frames once each, and every row's planes as indices into them."""
        slots = np.concatenate([self.obs_slots[:size], self.next_slots[:size]], axis=1)
        used, compact = np.unique(slots, return_inverse=True)
        frames = np.empty((len(used),) + self.obs_shape[1:], self.pool.dtype)
        if len(used):
            self.pool.gather(used, frames)
        compact = compact.reshape(slots.shape)
        return {"frames": torch.from_numpy(frames),
                "obs_frames": torch.from_numpy(compact[:, :self.planes].copy()),
                "next_obs_frames": torch.from_numpy(compact[:, self.planes:].copy())}

    def load_state_dict(self, state: dict[str, Any], size: int) -> None:
        """Rows from :meth:`state_dict`, or from a checkpoint that holds whole observations
        (written before frames were shared: such a run resumes, its frames now kept once)."""
        self.pool = FramePool(self.obs_shape[1:], str(self.pool.dtype), self.pool.block)
        self.obs_slots[:] = -1
        self.next_slots[:] = -1
        pairs = ((("obs_frames", self.obs_slots), ("next_obs_frames", self.next_slots))
                 if "frames" in state else (("obs", self.obs_slots),
                                            ("next_obs", self.next_slots)))
        frames = state["frames"].numpy() if "frames" in state else None
        for name, slots in pairs:
            rows = state[name].numpy()
            for row in range(size):
                planes = rows[row] if frames is None else frames[rows[row]]
                slots[row] = [self.pool.put(plane) for plane in planes]

    def nbytes(self) -> int:
        """Bytes of the pool and of every row's slot indices."""
        return self.pool.nbytes() + self.obs_slots.nbytes + self.next_slots.nbytes


def make_obs_store(capacity: int, obs_shape: tuple[int, ...], dtype: str) -> ObsStore:
    """Shared frames for stacked integer images (``uint8 [k, H, W]``), else dense rows."""
    if np.dtype(dtype) == np.uint8 and len(obs_shape) == 3:
        return FrameObsStore(capacity, obs_shape, dtype)
    return DenseObsStore(capacity, obs_shape, dtype)
