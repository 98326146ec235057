"""pytest wiring for the Slurm tests.

Tests marked ``@pytest.mark.slurm`` need the local test cluster
(``bash tests/slurm/cluster.sh start``).  When it does not answer they are
skipped with that hint -- except under ``CI=true``, where a skipped Slurm test
is a failure (with the same reason), so CI cannot pass without exercising
Slurm.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import slurmtools  # noqa: E402


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() == "true"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "slurm: needs the local Slurm test cluster (bash tests/slurm/cluster.sh start); "
        "skipped when it is down, a failure when CI=true",
    )


def _skip_or_fail(reason: str) -> None:
    if _in_ci():
        pytest.fail(f"CI=true: Slurm test cannot be skipped: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def slurm_cluster():
    """The :mod:`slurmtools` module, once the cluster is known to answer.

    Checked once per session; at the end, jobs submitted through
    ``slurmtools.submit`` that are still alive are cancelled.
    """
    ok, why = slurmtools.cluster_available()
    if not ok:
        _skip_or_fail(f"{why}; {slurmtools.START_HINT}")
    yield slurmtools
    leftover = slurmtools.cancel_submitted()
    if leftover:
        print(f"\n[slurm] cancelled leftover jobs: {' '.join(leftover)}")


@pytest.fixture(autouse=True)
def _slurm_gate(request: pytest.FixtureRequest):
    """Every ``slurm``-marked test needs the cluster, fixture requested or not;
    afterwards its still-running jobs are cancelled."""
    if request.node.get_closest_marker("slurm") is None:
        yield
        return
    request.getfixturevalue("slurm_cluster")
    first = len(slurmtools.SUBMITTED)
    yield
    # a failed or timed-out test must not leave its jobs holding nodes
    slurmtools.cancel_alive(slurmtools.SUBMITTED[first:])


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Under CI=true a skip of a slurm test (any cause) is reported as a failure."""
    report = yield
    if (
        _in_ci()
        and report.skipped
        and not hasattr(report, "wasxfail")
        and item.get_closest_marker("slurm") is not None
    ):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"CI=true: Slurm test cannot be skipped: {reason}"
    return report
