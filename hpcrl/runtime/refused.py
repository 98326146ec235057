"""Refusals at run time: said once for a whole job, and marked for the batch script.

A problem some ranks of a job meet before any work (a GPU missing on one node) is said
once, by rank 0, and every rank exits with status 2 (:func:`exit_if_any_rank_refuses`).

The Slurm templates start again a step that failed before its first update (a launch that
died in ``MPI_Init``), but a step that hpcrl refused (a config that cannot work, a launcher
whose MPI does not match) would only be refused again. Such a step says so by creating the
file the script names in ``HPCRL_REFUSED_FILE``, and the script stops instead.
"""
from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from typing import Any, NoReturn

from hpcrl.errors import ConfigError

REFUSED_FILE_VAR = "HPCRL_REFUSED_FILE"


def mark_refused() -> None:
    """Create the file of ``HPCRL_REFUSED_FILE`` when set (quietly: a refusal is already
    being said, and a missing directory must not hide it)."""
    path = os.environ.get(REFUSED_FILE_VAR)
    if path:
        try:
            Path(path).parent.mkdir(parents=True, exist_ok=True)  # (refused before creating it)
            Path(path).touch()
        except OSError:
            pass


#: the exit status of a run refused before it started (a bad config, a checkpoint it cannot
#: resume): a batch script does not start it again
EXIT_REFUSED = 2


def exit_refused() -> NoReturn:
    """Exit with status 2, a refusal, marked for the batch script."""
    mark_refused()
    sys.exit(EXIT_REFUSED)


def exit_if_any_rank_refuses(world: Any, problem: str | None, who: str) -> None:
    """Every rank exits with status 2 when any rank has a ``problem`` (a message naming the
    key and the fix), rank 0 printing the first with the rank, its role ``who`` and host;
    else returns. Collective: each rank calls it at the same point, so a problem that only
    some ranks meet (a GPU missing on one node) stops the whole job before any work, said
    once, instead of a silent exit of the rank that met it. A job of one process raises the
    problem as a :class:`~hpcrl.errors.ConfigError` instead."""
    if world.Get_size() == 1:
        if problem is not None:
            raise ConfigError(problem)
        return
    found = world.allgather(None if problem is None else (who, socket.gethostname(), problem))
    first = next(((rank, *item) for rank, item in enumerate(found) if item is not None), None)
    if first is None:
        return
    if world.Get_rank() == 0:
        rank, role, host, message = first
        where = f"rank {rank} ({role}) on {host}: " if world.Get_size() > 1 else ""
        print(f"hpcrl: {where}{message}", file=sys.stderr, flush=True)
    exit_refused()
