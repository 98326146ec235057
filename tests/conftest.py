"""Shared test set-up: tiny configs, and the machinery of multi-rank tests.

Multi-rank tests use mpi-pytest: a test marked ``@pytest.mark.parallel(n)`` is re-run by
the plugin as ``mpiexec -n n <pytest> <file>::<test>``, with ``mpiexec`` looked up on PATH.
Here the interpreter's own bin directory (the virtualenv's, where the pip ``mpich`` runtime
puts the ``mpiexec`` matching mpi4py) goes first on PATH; inside the MPI children each
``timeout`` marker becomes a slightly shorter one using pytest-timeout's "thread" method (a
rank stuck in a blocking MPI call never returns to Python, so the "signal" method cannot
interrupt it), and ranks other than 0 get their tracebacks back.
"""
from __future__ import annotations

import compileall
import os
import sys
from pathlib import Path

import pytest
import torch
from pytest_mpi.plugin import CHILD_PROCESS_FLAG

CHILD_TIMEOUT_MARGIN_S = 5.0

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
    process on the 2-core development machine); in MPI children, show the tracebacks of every rank, not
    only rank 0's."""
    if CHILD_PROCESS_FLAG not in os.environ:
        compileall.compile_dir(Path(__file__).parents[1] / "hpcrl", quiet=1)
    if CHILD_PROCESS_FLAG in os.environ and config.option.tbstyle == "no":
        config.option.tbstyle = "short"
        config.option.no_summary = False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The Slurm tests go to one xdist worker (they share the test cluster's nodes); in MPI
    children, make each test's timeout fire first and kill the rank."""
    if CHILD_PROCESS_FLAG not in os.environ:
        for item in items:
            if item.get_closest_marker("slurm") is not None:
                item.add_marker(pytest.mark.xdist_group("slurm"))
        return
    for item in items:
        marker = item.get_closest_marker("timeout")
        if marker is None or not marker.args:
            continue
        seconds = float(marker.args[0])
        child = max(seconds - CHILD_TIMEOUT_MARGIN_S, 0.75 * seconds)
        item.add_marker(pytest.mark.timeout(child, method="thread"), append=False)

torch.set_num_threads(1)

TINY = ["env.num_envs=4", "algo.num_steps=16", "algo.minibatch_size=32", "algo.num_epochs=2",
        "train.total_env_steps=1024", "train.eval_episodes=0", "train.tensorboard=false",
        "train.checkpoint_every=4"]


@pytest.fixture
def tiny_overrides() -> list[str]:
    """Overrides that make the default PPO job train in about a second."""
    return list(TINY)

