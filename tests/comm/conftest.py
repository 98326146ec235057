"""Shared set-up for the communication-layer tests.

Multi-rank tests use mpi-pytest: a test marked ``@pytest.mark.parallel(n)``
is re-run by the plugin as ``mpiexec -n n <pytest> <file>::<test>``, with
``mpiexec`` looked up on PATH. Two things are arranged here:

* the interpreter's own bin directory (the virtualenv's, where the pip
  ``mpich`` runtime puts the ``mpiexec`` matching mpi4py's library) goes
  first on PATH, so a bare ``.venv/bin/python -m pytest`` works too;
* inside those MPI children, each ``timeout`` marker is replaced by a
  slightly shorter one using pytest-timeout's "thread" method. A rank stuck
  in a blocking MPI call never returns to Python, so the default "signal"
  method cannot interrupt it; the thread method dumps every thread's stack
  and exits the rank, and mpiexec then ends the job, so a hang shows up as
  a failure with stacks rather than as the parent's bare kill;
* mpi-pytest runs ranks other than 0 with ``--tb=no --no-summary``; here
  they get short tracebacks back, since a failure is often only on one of them.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from pytest_mpi.plugin import CHILD_PROCESS_FLAG

CHILD_TIMEOUT_MARGIN_S = 5.0
_HERE = Path(__file__).parent

_bin = os.path.dirname(sys.executable)
if os.environ.get("PATH", "").split(os.pathsep)[0] != _bin:
    os.environ["PATH"] = _bin + os.pathsep + os.environ.get("PATH", "")
os.environ.setdefault("OMP_NUM_THREADS", "1")


def pytest_configure(config: pytest.Config) -> None:
    """In MPI children, show the tracebacks of every rank, not only rank 0's."""
    if CHILD_PROCESS_FLAG in os.environ and config.option.tbstyle == "no":
        config.option.tbstyle = "short"
        config.option.no_summary = False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In MPI children, make each test's timeout fire first and kill the rank."""
    if CHILD_PROCESS_FLAG not in os.environ:
        return
    for item in items:
        if _HERE not in Path(str(item.fspath)).parents:
            continue
        marker = item.get_closest_marker("timeout")
        if marker is None or not marker.args:
            continue
        seconds = float(marker.args[0])
        child = max(seconds - CHILD_TIMEOUT_MARGIN_S, 0.75 * seconds)
        item.add_marker(pytest.mark.timeout(child, method="thread"), append=False)
