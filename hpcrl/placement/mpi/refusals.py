"""A problem some ranks of a job meet before any work, said once for the whole job."""
from __future__ import annotations

import socket
import sys
from typing import Any

from hpcrl.errors import ConfigError
from hpcrl.runtime.refused import exit_refused


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
