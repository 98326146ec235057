"""A refusal's mark for the batch script that started the run.

The Slurm templates start again a step that failed before its first update (a launch that
died in ``MPI_Init``), but a step that hpcrl refused (a config that cannot work, a launcher
whose MPI does not match) would only be refused again. Such a step says so by creating the
file the script names in ``HPCRL_REFUSED_FILE``, and the script stops instead.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import NoReturn

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


def exit_refused() -> NoReturn:
    """Exit with status 2, a refusal, marked for the batch script."""
    mark_refused()
    sys.exit(2)
