"""How an env's observations are carried between roles and turned into network features.

Gymnasium envs observe through a ``Box`` (an array of numbers), a ``Discrete`` (one integer,
as in FrozenLake or Taxi), a ``MultiDiscrete`` (several integers), or a ``Tuple`` of those
(Blackjack's ``Tuple(Discrete(32), Discrete(11), Discrete(2))``), or a ``Dict`` of any of
these (an image and a vector, say). An :class:`ObsFormat` describes, for one such space:

- the *carried* form of one observation: an array of :attr:`ObsFormat.shape` and
  :attr:`ObsFormat.dtype` that rollouts, replays, messages and checkpoints hold. Integer
  observations stay integers (int64), and integer or bool Box observations (uint8 frames,
  MinAtar's bool channels) keep their dtype, so nothing is rounded or inflated on the way;
- the *features* the networks see: Box values as they are (flattened), every integer
  component one-hot encoded over its ``n`` values, concatenated in the space's order.

A ``Dict`` observation is carried as one row of bytes in which every key keeps its own
dtype at its own (8-byte aligned) offset: a uint8 image stays one byte a pixel next to a
float32 vector, and rollouts, replays and messages carry it as they carry any uint8 row.
The networks unpack the keys (:meth:`ObsFormat.unpack`) and give each its own encoder;
a key whose features are its values has uint8 images scaled to [0, 1].

The encoding happens inside the networks (:meth:`ObsFormat.encode`), so a saved policy takes
the env's raw observation, and collectors evaluate the same encoding in numpy
(:meth:`ObsFormat.encode_numpy`). Spaces no network here can take (``Text``, ``Graph``,
``Sequence``...) are refused by :func:`obs_format` with the wrapper that fixes it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from hpcrl.errors import ExplainedError

# one part of an observation: ("box", columns) or ("onehot", n, start)
Part = tuple


class UnsupportedSpace(ExplainedError, ValueError):
    """An observation space that no hpcrl network takes; the message names the fix."""


@dataclass(frozen=True)
class ObsFormat:
    """The carried shape and dtype of one observation and how it becomes features.

    ``parts`` lists the columns of the flattened carried observation in order: a
    ``("box", k)`` part is ``k`` real values passed through, a ``("onehot", n, start)`` part
    is one integer in ``[start, start + n)`` encoded as ``n`` features. A plain ``Box`` space
    has ``raw`` set: its observations keep the env's shape and are only flattened.
    A ``Dict`` space has ``keys``: each key's name, format and byte offset in the carried
    uint8 row (its ``parts`` are empty).
    """

    shape: tuple[int, ...]
    dtype: str
    parts: tuple[Part, ...]
    raw_shape: tuple[int, ...]
    raw: bool = False
    keys: tuple[tuple[str, ObsFormat, int], ...] = ()

    @property
    def features(self) -> int:
        """Width of the feature vector :meth:`encode` gives."""
        if self.keys:
            return sum(fmt.features for _, fmt, _ in self.keys)
        return sum(p[1] for p in self.parts)

    @property
    def one_hot(self) -> bool:
        """Whether any part is one-hot encoded (observation normalisation does not apply)."""
        if self.keys:
            return any(fmt.one_hot for _, fmt, _ in self.keys)
        return any(p[0] == "onehot" for p in self.parts)

    @property
    def packed(self) -> bool:
        """Whether observations are ``Dict`` rows of bytes (no arithmetic applies to them)."""
        return bool(self.keys)

    @property
    def image(self) -> bool:
        """Whether observations are images, ``[H, W, C]`` or ``[C, H, W]`` Box values."""
        return self.raw and len(self.shape) == 3

    @property
    def pixel_scale(self) -> float:
        """1/255 for a uint8 image, 1 otherwise: what a ``Dict`` key's values are scaled by
        when its features are its values."""
        return 1.0 / 255.0 if self.image and self.dtype == "uint8" else 1.0

    @property
    def nbytes(self) -> int:
        """Bytes of one carried observation."""
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize

    # -- Dict observations -------------------------------------------------------------------
    def _pack(self, batch: dict[str, Any], n: int) -> np.ndarray:
        out = np.zeros((n,) + self.shape, np.uint8)
        for name, fmt, offset in self.keys:
            part = fmt.carry(batch[name])
            out[:, offset:offset + fmt.nbytes] = part.reshape(n, -1).view(np.uint8)
        return out

    def unpack(self, obs: torch.Tensor) -> dict[str, torch.Tensor]:
        """The keys of carried ``Dict`` observations ``[B, nbytes]``, each ``[B, *shape]`` in
        the dtype its format carries."""
        out = {}
        for name, fmt, offset in self.keys:
            raw = obs[:, offset:offset + fmt.nbytes].contiguous()
            out[name] = raw.view(getattr(torch, fmt.dtype)).reshape((-1,) + fmt.shape)
        return out

    def unpack_numpy(self, obs: np.ndarray) -> dict[str, np.ndarray]:
        """:meth:`unpack` in numpy."""
        return {name: np.ascontiguousarray(obs[:, offset:offset + fmt.nbytes]).view(
            fmt.dtype).reshape((-1,) + fmt.shape) for name, fmt, offset in self.keys}

    # -- carried form ------------------------------------------------------------------------
    def carry(self, obs: Any) -> np.ndarray:
        """A vector env's batch of observations as ``[N, *shape]`` in the carried dtype.

        ``Tuple`` spaces come from Gymnasium's vector envs as a tuple of per-part batches,
        ``Dict`` spaces as a dict of per-key batches.
        """
        if self.keys:
            n = len(np.asarray(obs[self.keys[0][0]]))
            return self._pack(obs, n)
        if isinstance(obs, tuple):
            n = len(np.asarray(obs[0]))
            cols = [np.asarray(p).reshape(n, -1) for p in obs]
            return np.concatenate(cols, axis=1).astype(self.dtype, copy=False)
        obs = np.asarray(obs)
        return obs.reshape((obs.shape[0],) + self.shape).astype(self.dtype, copy=False)

    def carry_each(self, items: Any) -> np.ndarray:
        """Single raw observations (a list, e.g. a vector env's ``final_obs`` entries) as
        ``[len(items), *shape]`` in the carried dtype."""
        if self.keys:
            return self._pack({name: fmt.carry_each([o[name] for o in items])
                               for name, fmt, _ in self.keys}, len(items))
        rows = [np.concatenate([np.asarray(p).reshape(-1) for p in o]) if isinstance(o, tuple)
                else np.asarray(o).reshape(-1) for o in items]
        return np.stack(rows).reshape((len(rows),) + self.shape).astype(self.dtype, copy=False)

    def as_batch(self, obs: Any) -> tuple[torch.Tensor, bool]:
        """Raw observations (one, or a batch) as a ``[B, *shape]`` tensor, and whether one
        came unbatched: what a saved policy does with whatever the env returned."""
        if self.keys and isinstance(obs, dict):  # raw Dict observations, one or a batch
            name, fmt, _ = self.keys[0]
            single = np.ndim(obs[name]) == len(fmt.raw_shape)
            if single:
                return torch.from_numpy(self.carry_each([obs])), True
            return torch.from_numpy(self.carry(obs)), False
        if isinstance(obs, tuple):  # one raw Tuple observation: its parts in order
            flat = np.concatenate([np.asarray(p, dtype=np.float64).reshape(-1) for p in obs])
            return torch.as_tensor(flat.astype(self.dtype)).reshape((1,) + self.shape), True
        tensor = torch.as_tensor(obs)
        single = tensor.dim() == len(self.raw_shape)
        if single:
            tensor = tensor.unsqueeze(0)
        return tensor.reshape((tensor.shape[0],) + self.shape), single

    # -- features ----------------------------------------------------------------------------
    def encode(self, obs: torch.Tensor) -> torch.Tensor:
        """Float features ``[B, features]`` of carried observations ``[B, *shape]``."""
        if self.keys:
            keys = self.unpack(obs)
            return torch.cat([_scaled(fmt.encode(keys[name]), fmt.pixel_scale)
                              for name, fmt, _ in self.keys], dim=1)
        flat = obs.reshape(obs.shape[0], -1)
        if self.raw or not self.one_hot:
            return flat.float()
        out, col = [], 0
        for part in self.parts:
            if part[0] == "box":
                out.append(flat[:, col:col + part[1]].float())
                col += part[1]
            else:
                index = (flat[:, col].long() - part[2]).clamp(0, part[1] - 1)
                out.append(torch.nn.functional.one_hot(index, part[1]).float())
                col += 1
        return torch.cat(out, dim=1)

    def encode_numpy(self, obs: np.ndarray) -> np.ndarray:
        """:meth:`encode` in numpy (float32), for the collectors' numpy engines."""
        if self.keys:
            keys = self.unpack_numpy(obs)
            return np.concatenate([_scaled(fmt.encode_numpy(keys[name]), fmt.pixel_scale)
                                   for name, fmt, _ in self.keys], axis=1)
        flat = obs.reshape(obs.shape[0], -1)
        if self.raw or not self.one_hot:
            return flat.astype(np.float32, copy=False)
        out = np.zeros((flat.shape[0], self.features), np.float32)
        col, feature = 0, 0
        rows = np.arange(flat.shape[0])
        for part in self.parts:
            if part[0] == "box":
                out[:, feature:feature + part[1]] = flat[:, col:col + part[1]]
                col += part[1]
            else:
                index = np.clip(flat[:, col].astype(np.int64) - part[2], 0, part[1] - 1)
                out[rows, feature + index] = 1.0
                col += 1
            feature += part[1]
        return out

    # -- records -----------------------------------------------------------------------------
    def record(self) -> dict[str, Any]:
        """Plain data for a checkpoint's saved policy (see :func:`format_from_saved`)."""
        record = {"shape": list(self.shape), "dtype": self.dtype, "raw": self.raw,
                  "raw_shape": list(self.raw_shape), "parts": [list(p) for p in self.parts]}
        if self.keys:
            record["keys"] = [[name, fmt.record(), offset] for name, fmt, offset in self.keys]
        return record


def _scaled(features: Any, scale: float) -> Any:
    """``features * scale`` (torch or numpy float32), untouched when ``scale`` is 1."""
    return features if scale == 1.0 else features * np.float32(scale)


def box_format(shape: tuple[int, ...], dtype: str = "float32") -> ObsFormat:
    """The format of a plain ``Box`` observation of ``shape``, carried as ``dtype``."""
    return ObsFormat(tuple(shape), dtype, (("box", int(np.prod(shape, dtype=np.int64))),),
                     tuple(shape), raw=True)


def box_dtype(space: gym.spaces.Box, keep_integers: bool = True) -> str:
    """The carried dtype of a Box: integer and bool pixels keep theirs (a uint8 frame is 4x
    smaller than float32 on the wire and in replays), real values travel as float32."""
    kind = np.dtype(space.dtype).kind
    if keep_integers and kind in "biu":
        return str(np.dtype(space.dtype))
    return "float32"


def format_from_saved(record: dict[str, Any]) -> ObsFormat:
    """Rebuild :meth:`ObsFormat.record`."""
    keys = tuple((name, format_from_saved(sub), int(offset))
                 for name, sub, offset in record.get("keys", ()))
    return ObsFormat(tuple(record["shape"]), record["dtype"],
                     tuple(tuple(p) for p in record["parts"]), tuple(record["raw_shape"]),
                     bool(record["raw"]), keys)


def _parts(space: gym.Space, where: str) -> list[Part]:
    if isinstance(space, gym.spaces.Box):
        return [("box", int(np.prod(space.shape, dtype=np.int64)))]
    if isinstance(space, gym.spaces.Discrete):
        return [("onehot", int(space.n), int(space.start))]
    if isinstance(space, gym.spaces.MultiBinary):
        return [("onehot", 2, 0)] * int(np.prod(space.shape, dtype=np.int64))
    if isinstance(space, gym.spaces.MultiDiscrete):
        return [("onehot", int(n), int(s))
                for n, s in zip(np.ravel(space.nvec), np.ravel(space.start), strict=True)]
    if isinstance(space, gym.spaces.Tuple):
        return [p for i, sub in enumerate(space.spaces) for p in _parts(sub, f"{where}[{i}]")]
    fix = ("gymnasium.wrappers.FlattenObservation" if isinstance(space, gym.spaces.Dict)
           else "an observation wrapper that turns it into a Box")
    raise UnsupportedSpace(f"{where} {space} is not a space hpcrl's networks take (Box, "
                           f"Discrete, MultiDiscrete, MultiBinary, a Tuple of those, or a Dict "
                           f"of any of these); wrap the env with {fix}")


def dict_format(space: gym.spaces.Dict, keep_integers: bool = True) -> ObsFormat:
    """The packed format of a ``Dict`` space: each key's carried bytes at an offset aligned to
    8, in the space's key order."""
    keys, offset = [], 0
    for name, sub in space.spaces.items():
        if isinstance(sub, gym.spaces.Dict):
            raise UnsupportedSpace(f"observation space key {name!r} is itself a Dict; wrap the "
                                   f"env with gymnasium.wrappers.FlattenObservation")
        fmt = obs_format(sub, keep_integers, where=f"observation space key {name!r}")
        keys.append((str(name), fmt, offset))
        offset += -(-fmt.nbytes // 8) * 8
    if not keys:
        raise UnsupportedSpace("observation space is an empty Dict")
    return ObsFormat((offset,), "uint8", (), (len(keys),), keys=tuple(keys))


def obs_format(space: gym.Space, keep_integers: bool = True,
               where: str = "observation space") -> ObsFormat:
    """The :class:`ObsFormat` of an env's (single) observation space.

    ``keep_integers=False`` carries integer Box observations as float32, for runs that
    normalise observations (the normalised values are real)."""
    if isinstance(space, gym.spaces.Box):
        return box_format(tuple(space.shape), box_dtype(space, keep_integers))
    if isinstance(space, gym.spaces.Dict):
        return dict_format(space, keep_integers)
    parts = _parts(space, where)
    columns = sum(p[1] if p[0] == "box" else 1 for p in parts)
    dtype = "float32" if any(p[0] == "box" for p in parts) else "int64"
    if isinstance(space, gym.spaces.Discrete):
        raw_shape: tuple[int, ...] = ()
    elif isinstance(space, (gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
        raw_shape = tuple(space.shape)
    else:
        raw_shape = (columns,)
    return ObsFormat((columns,), dtype, tuple(parts), raw_shape)


ObsInput = torch.Tensor | np.ndarray | tuple | int | float
