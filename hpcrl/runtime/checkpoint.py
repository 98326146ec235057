"""Checkpoint files: written atomically, read without running any code.

A checkpoint is a dict of tensors and plain Python values saved with ``torch.save`` and read
with ``torch.load(weights_only=True)``, so a crafted file cannot execute code. Before writing,
the structure of the state is checked (:func:`check_loadable`), so a value that would not load
back is an error naming where it is, at write time. Writes go to
a temporary file in the same directory, are flushed to disk and then renamed over the old
file: a job killed at any moment leaves either the old or the new checkpoint, never half.
"""
from __future__ import annotations

import importlib
import os
import pickle
import shutil
import zipfile
from collections import OrderedDict
from contextlib import AbstractContextManager, suppress
from pathlib import Path
from typing import IO, Any

import numpy as np
import torch

from hpcrl.errors import ExplainedError
from hpcrl.runtime.run_dir import write_error, writing

FORMAT = "hpcrl-checkpoint/1"

# Leaf types that ``torch.load(weights_only=True)`` rebuilds, by exact type (a subclass such as
# numpy.float64 pickles as its own class, which that loader refuses).
_LEAVES = frozenset({type(None), bool, int, float, complex, str, bytes, bytearray,
                     torch.Tensor, torch.nn.Parameter, torch.Size, torch.device, torch.dtype})
_SEQUENCES = frozenset({list, tuple, set})
_MAPPINGS = frozenset({dict, OrderedDict})


class CheckpointError(ExplainedError):
    """A checkpoint that is missing, unreadable, not an hpcrl checkpoint, or not writable."""


def _join(where: str, key: Any) -> str:
    if type(key) is str:
        return f"{where}.{key}" if where else key
    return f"{where}[{key!r}]"


def unloadable_value(value: Any, where: str = "") -> str | None:
    """``"path: type"`` of the first value under ``value`` that would not load back, or None.

    Only the container structure is walked: tensors are leaves, so a replay buffer of large
    tensors costs as little as its dict of a few keys.
    """
    kind = type(value)
    if kind in _LEAVES:
        return None
    if kind in _SEQUENCES:
        for i, item in enumerate(value):
            bad = unloadable_value(item, f"{where}[{i}]")
            if bad:
                return bad
        return None
    if kind in _MAPPINGS:
        for key, item in value.items():
            bad = (None if type(key) in _LEAVES else f"{_join(where, key)} (key): "
                   f"{type(key).__module__}.{type(key).__qualname__}") or \
                unloadable_value(item, _join(where, key))
            if bad:
                return bad
        return None
    return f"{where or '<checkpoint>'}: {kind.__module__}.{kind.__qualname__}"


def check_loadable(state: dict[str, Any], path: Path) -> None:
    """Raise :class:`CheckpointError` naming the first value of ``state`` that
    ``torch.load(weights_only=True)`` would refuse, before anything is written to ``path``."""
    bad = unloadable_value(state)
    if bad:
        raise CheckpointError(
            f"refusing to write checkpoint '{path}': {bad} would not load back with "
            f"torch.load(weights_only=True); only tensors, None, bool, int, float, complex, str, "
            f"bytes and lists, tuples, sets and dicts of them can be saved. This is a bug in the "
            f"code that captured that value (encode it with hpcrl.envs.state.to_plain); "
            f"please report it")


class _RecordingFile:
    """The temp file as ``torch.save`` sees it: keeps the ``OSError`` (a full disk, say) that
    torch's zip writer turns into an unhelpful ``RuntimeError``."""

    def __init__(self, file: IO[bytes]) -> None:
        self.file = file
        self.error: OSError | None = None

    def write(self, data: bytes) -> int:
        try:
            return self.file.write(data)
        except OSError as err:
            self.error = self.error or err
            raise

    def flush(self) -> None:
        try:
            self.file.flush()
        except OSError as err:
            self.error = self.error or err
            raise


def save_atomic(state: dict[str, Any], path: str | Path) -> Path:
    """Write ``state`` to ``path`` atomically (temp file, fsync, rename, fsync directory).

    Raises :class:`CheckpointError` if a value would not load back, and
    :class:`~hpcrl.runtime.run_dir.RunWriteError` naming ``path`` if the file system refuses
    the write (full, read-only); either way the previous checkpoint is left as it was and no
    temp file is left behind.
    """
    path = Path(path)
    state = {"format": FORMAT, **state}
    check_loadable(state, path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    recorder: _RecordingFile | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as f:
            recorder = _RecordingFile(f)
            # torch.save writes through write/flush alone (a stream it cannot seek); its
            # hint asks for a whole IO[bytes]
            torch.save(state, recorder)  # type: ignore[arg-type]
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except (OSError, RuntimeError) as err:
        cause = err if isinstance(err, OSError) else recorder.error if recorder else None
        if cause is None:
            raise
        kept = "; the previous checkpoint there is intact" if path.is_file() else ""
        raise write_error("checkpoint", path, cause, kept) from err
    finally:
        with suppress(OSError):
            tmp.unlink(missing_ok=True)
    return path


def keep_recent(last: Path, env_steps: int, keep: int) -> None:
    """With ``keep`` > 1, link the checkpoint just written (``last``) as
    ``steps-<env_steps>.pt`` beside it and delete all but the ``keep`` newest such files
    (a link costs no space while it is also ``last``)."""
    if keep <= 1:
        return
    named = last.with_name(f"steps-{env_steps}.pt")
    with writing("checkpoint copy", named):
        named.unlink(missing_ok=True)
        try:
            os.link(last, named)
        except OSError:  # a file system without hard links
            shutil.copyfile(last, named)
    saved = sorted((p for p in last.parent.glob("steps-*.pt") if p.stem[6:].isdigit()),
                   key=lambda p: int(p.stem[6:]))  # by env steps, oldest first
    for old in saved[:-keep]:
        old.unlink(missing_ok=True)


def load_checkpoint(path: str | Path, mmap: bool = False) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_atomic`, with ``weights_only=True``;
    ``mmap``: its tensors memory-mapped, not read (what reading a few counters needs)."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at '{path}'")
    try:
        with _allow_numpy_scalars():
            state = torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except (pickle.UnpicklingError, zipfile.BadZipFile, RuntimeError, EOFError) as err:
        raise CheckpointError(f"'{path}' cannot be read safely as a checkpoint: it is corrupt "
                              f"or was not written by hpcrl ({_load_cause(err)})") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointError(f"'{path}' is not an hpcrl checkpoint (format "
                              f"{state.get('format') if isinstance(state, dict) else None!r}, "
                              f"expected {FORMAT!r})")
    return state


def checkpoint_env_steps(path: str | Path) -> int:
    """The env steps a checkpoint was taken at, read without loading its tensors (a
    replay's gigabytes cost nothing)."""
    return int(load_checkpoint(path, mmap=True)["counters"]["env_steps"])


def _load_cause(err: BaseException) -> str:
    """The line of torch's several-paragraph load error that says what was wrong (after its
    ``WeightsUnpickler error:``), cut to a readable length."""
    text = str(err)
    text = text.split("WeightsUnpickler error:", 1)[-1].strip().splitlines()[0] if text else ""
    text = text if len(text) <= 120 else text[:117] + "..."
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def _allow_numpy_scalars() -> AbstractContextManager[None]:
    """Allow :func:`_numpy_scalar_globals` for one load."""
    return torch.serialization.safe_globals(_numpy_scalar_globals())


def _numpy_scalar_globals() -> list[Any]:
    """What a numpy scalar pickles as: ``scalar(dtype, bytes)`` and the dtype's classes.

    Checkpoints written before env state was converted to plain data can hold numpy float64
    (and str_) scalars; these are the only numpy globals allowed, and none of them can run
    code: they rebuild a number from its dtype and its bytes. Arrays stay refused.
    """
    try:
        multiarray = importlib.import_module("numpy._core.multiarray")  # numpy >= 2
    except ImportError:
        multiarray = importlib.import_module("numpy.core.multiarray")  # numpy 1.x
    scalar = multiarray.scalar
    dtype_classes = [type(np.dtype(code)) for code in "?bhilqpBHILQPefdgFDGU"]
    # a file written under the other numpy major version names the other module path
    return [scalar, np.dtype, *dtype_classes,
            *((scalar, f"{module}.multiarray.scalar") for module in ("numpy.core",
                                                                    "numpy._core"))]
