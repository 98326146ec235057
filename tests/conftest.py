"""Shared test set-up: tiny configs, and the machinery of multi-rank tests.

Multi-rank tests use mpi-pytest: a test marked ``@pytest.mark.parallel(n)`` is re-run by
the plugin as ``mpiexec -n n <pytest> <file>::<test>``, with ``mpiexec`` looked up on PATH.
Here the interpreter's own bin directory (the virtualenv's, where the pip ``mpich`` runtime
puts the ``mpiexec`` matching mpi4py) goes first on PATH; inside the MPI children each
``timeout`` marker becomes one that fires a margin before the parent's, using pytest-timeout's
"thread" method (a rank stuck in a blocking MPI call never returns to Python, so the "signal"
method cannot interrupt it), and ranks other than 0 get their tracebacks back.

The children's timeout is counted from the parent's deadline (passed in ``TEST_DEADLINE_VAR``),
not from their own start: starting ``mpiexec`` and two interpreters that import torch takes
1-2 s on an idle machine but 10-20 s on a loaded one, and a child timeout of "the marker's
seconds minus a margin", counted from the child's start, then fired after the parent's. The
parent then killed ``mpiexec`` and every rank's stack dump was lost with it.
"""
from __future__ import annotations

import compileall
import importlib.util
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from pytest_mpi.plugin import CHILD_PROCESS_FLAG


def _quick_lane() -> Any:
    """tests/quick_lane.py, loaded by its path (a test that loads this file from elsewhere,
    as tests/placement/mpi/test_child_timeouts.py does, has no tests/ on its path)."""
    spec = importlib.util.spec_from_file_location("quick_lane",
                                                  Path(__file__).with_name("quick_lane.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


quick_test = _quick_lane().quick_test
CHILD_TIMEOUT_MARGIN_S = 5.0
TEST_DEADLINE_VAR = "HPCRL_TEST_DEADLINE"  # the parent's deadline (epoch seconds), for children
# Where each test's cost goes, one JSON line per test (nodeid, wall seconds, CPU seconds of
# the test process and of the processes it started and waited for: mpiexec and its ranks,
# CLI subprocesses), when set: `HPCRL_TEST_COSTS=/tmp/costs.jsonl pytest`. CPU seconds do
# not depend on what else the machine is doing, so a run beside other work still ranks the
# tests by what they cost a 2-core CI machine. Jobs Slurm starts are not children: their
# tests show wall time only.
TEST_COSTS_VAR = "HPCRL_TEST_COSTS"

_bin = os.path.dirname(sys.executable)
if os.environ.get("PATH", "").split(os.pathsep)[0] != _bin:
    os.environ["PATH"] = _bin + os.pathsep + os.environ.get("PATH", "")
os.environ.setdefault("OMP_NUM_THREADS", "1")
if CHILD_PROCESS_FLAG not in os.environ:
    # the ranks mpi-pytest starts run pytest too: one test each, without workers of their own
    os.environ["PYTEST_ADDOPTS"] = (os.environ.get("PYTEST_ADDOPTS", "") + " -n 0").strip()


def pytest_configure(config: pytest.Config) -> None:
    """Compile hpcrl's modules once (the suite starts hundreds of processes, and where
    ``PYTHONDONTWRITEBYTECODE`` is set each would compile them again: about 0.3 s of CPU per
    process on the 2-core development machine); in MPI children, show the tracebacks of every
    rank, not only rank 0's."""
    if CHILD_PROCESS_FLAG not in os.environ:
        compileall.compile_dir(Path(__file__).parents[1] / "hpcrl", quiet=1)
    if CHILD_PROCESS_FLAG in os.environ and config.option.tbstyle == "no":
        config.option.tbstyle = "short"
        config.option.no_summary = False


@pytest.hookimpl(tryfirst=True)  # before ``-m`` selects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the quick lane's tests ``quick`` (tests/quick_lane.py); spread the Slurm tests
    among the multi-rank ones; in MPI children, make each test's timeout fire first and kill
    the rank."""
    if CHILD_PROCESS_FLAG not in os.environ:
        for item in items:
            if quick_test(item.nodeid):
                item.add_marker(pytest.mark.quick)
        items[:] = spread_waiting_tests(items)
        return
    deadline = os.environ.get(TEST_DEADLINE_VAR)
    for item in items:
        marker = item.get_closest_marker("timeout")
        if marker is None or not marker.args:
            continue
        seconds = float(marker.args[0])
        left = float(deadline) - time.time() if deadline else seconds
        child = child_timeout(seconds, left)
        item.add_marker(pytest.mark.timeout(child, method="thread"), append=False)


def spread_waiting_tests(items: list[pytest.Item]) -> list[pytest.Item]:
    """``items`` with the Slurm tests spread evenly among the multi-rank tests of
    ``tests/placement/mpi``, in the same order on every xdist worker (xdist hands out tests in
    collection order). A Slurm test mostly waits for the test cluster's scheduler, and when
    two ran side by side (they are neighbours in the tree) both workers waited and a core
    stood idle for two minutes; beside a multi-rank test the other worker's ranks use it.
    (The ``xdist_group`` marker that was to keep them on one worker has no effect under
    pytest 9: pytest-xdist 3.8 sets a node id attribute pytest no longer reads.)"""
    waiting = [item for item in items if item.get_closest_marker("slurm") is not None]
    ranks = {id(item): n for n, item in enumerate(
        item for item in items if item.nodeid.startswith("tests/placement/mpi/"))}
    if not waiting or not ranks:
        return items
    every = max(len(ranks) // (len(waiting) + 1), 1)
    queue = list(waiting)
    mixed: list[pytest.Item] = []
    for item in items:
        if item in waiting:
            continue
        mixed.append(item)
        n = ranks.get(id(item))
        if n is not None and queue and (n + 1) % every == 0:
            mixed.append(queue.pop(0))
    return mixed + queue


def child_timeout(seconds: float, left: float) -> float:
    """The timeout of a rank of a test marked ``timeout(seconds)`` whose parent gives up in
    ``left`` seconds: a margin earlier (``CHILD_TIMEOUT_MARGIN_S``, at most a quarter of the
    marker's), for the stack dump to reach the parent; never 0, which pytest-timeout reads
    as "no timeout"."""
    margin = min(CHILD_TIMEOUT_MARGIN_S, 0.25 * seconds)
    return max(left - margin, 0.01)


def _parent_timeout(item: pytest.Item) -> float | None:
    """The seconds of ``item``'s timeout marker, when mpi-pytest will run it in MPI ranks."""
    marker = item.get_closest_marker("timeout")
    if CHILD_PROCESS_FLAG in os.environ or item.get_closest_marker("parallel") is None:
        return None
    return float(marker.args[0]) if marker is not None and marker.args else None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before mpi-pytest starts a test's ranks, tell them when this process's timeout fires
    (pytest-timeout started it a moment ago, around the whole test)."""
    seconds = _parent_timeout(item)
    if seconds is not None:
        os.environ[TEST_DEADLINE_VAR] = repr(time.time() + seconds)


def pytest_runtest_teardown(item: pytest.Item) -> None:
    if _parent_timeout(item) is not None:
        os.environ.pop(TEST_DEADLINE_VAR, None)

def _cpu_seconds() -> float:
    """CPU seconds (user and system) of this process and its waited-for descendants."""
    own, children = (resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                          resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """With ``HPCRL_TEST_COSTS`` set (outside MPI children), append the test's wall and CPU
    seconds to that file, with its start time and xdist worker (which show a worker left
    idle while the other finishes): the figures the suite's time budget is managed by."""
    path = os.environ.get(TEST_COSTS_VAR)
    if not path or CHILD_PROCESS_FLAG in os.environ:
        yield
        return
    started, wall, cpu = time.time(), time.monotonic(), _cpu_seconds()
    yield
    record = {"test": item.nodeid, "wall_s": round(time.monotonic() - wall, 2),
              "cpu_s": round(_cpu_seconds() - cpu, 2), "start": round(started, 2),
              "worker": os.environ.get("PYTEST_XDIST_WORKER", "main")}
    with open(path, "a") as out:
        out.write(json.dumps(record) + "\n")


torch.set_num_threads(1)

TINY = ["env.num_envs=4", "algo.num_steps=16", "algo.ppo.minibatch_size=32",
        "algo.ppo.num_epochs=2",
        "train.total_env_steps=1024", "train.eval_episodes=0", "train.tensorboard=false",
        "train.checkpoint_every=4"]


@pytest.fixture
def tiny_overrides() -> list[str]:
    """Overrides that make the default PPO job train in about a second."""
    return list(TINY)

