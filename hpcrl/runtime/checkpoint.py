"""Checkpoint files: written atomically, read without running any code.

A checkpoint is a dict of tensors and plain Python values saved with ``torch.save`` and read
with ``torch.load(weights_only=True)``, so a crafted file cannot execute code. Writes go to
a temporary file in the same directory, are flushed to disk and then renamed over the old
file: a job killed at any moment leaves either the old or the new checkpoint, never half.
"""
from __future__ import annotations

import os
import pickle
import zipfile
from pathlib import Path
from typing import Any

import torch

FORMAT = "hpcrl-checkpoint/1"


class CheckpointError(RuntimeError):
    """A checkpoint that is missing, unreadable or not an hpcrl checkpoint."""


def save_atomic(state: dict[str, Any], path: str | Path) -> Path:
    """Write ``state`` to ``path`` atomically (temp file, fsync, rename, fsync directory)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            torch.save({"format": FORMAT, **state}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return path


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_atomic`, with ``weights_only=True``."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at '{path}'")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, zipfile.BadZipFile, RuntimeError, EOFError) as err:
        raise CheckpointError(f"checkpoint '{path}' cannot be read safely ({err}); it is "
                              f"corrupt or was not written by hpcrl") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointError(f"'{path}' is not an hpcrl checkpoint (format "
                              f"{state.get('format') if isinstance(state, dict) else None!r}, "
                              f"expected {FORMAT!r})")
    return state
