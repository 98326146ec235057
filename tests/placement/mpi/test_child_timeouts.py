"""A hung multi-rank test is reported with its ranks' stacks, however slowly its ranks start.

tests/conftest.py gives every rank mpi-pytest starts a timeout that fires before the parent's,
so that each rank dumps where it hangs before the parent gives up and kills ``mpiexec`` (and
the dumps with it). Here the ranks of a test that hangs start several seconds late (as on a
loaded machine, where ``mpiexec`` and two interpreters importing torch take 10-20 s), and the
ranks' stack dumps must still reach the parent's output.
"""
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TESTS = Path(__file__).parents[2]
MARKER_S = 16  # the hung test's timeout; its ranks' fires 4 s (a quarter) before
SLOW_START_S = 6  # longer than that margin, shorter than the time left to the ranks

CONFTEST = f"""
import importlib.util, os, time
from pytest_mpi.plugin import CHILD_PROCESS_FLAG

spec = importlib.util.spec_from_file_location("hpcrl_tests_conftest",
                                              {str(TESTS / "conftest.py")!r})
project = importlib.util.module_from_spec(spec)
spec.loader.exec_module(project)
globals().update({{k: v for k, v in vars(project).items() if k.startswith("pytest_")}})
if CHILD_PROCESS_FLAG in os.environ:
    time.sleep({SLOW_START_S})  # a rank that starts late, as on a loaded machine
"""

HUNG_TEST = f"""
import time
import pytest


def every_rank_hangs_here():
    time.sleep(600)


@pytest.mark.timeout({MARKER_S})
@pytest.mark.parallel(2)
def test_hangs():
    every_rank_hangs_here()
"""


@pytest.mark.timeout(90)
def test_late_ranks_of_a_hung_test_dump_their_stacks_before_the_parent_gives_up(tmp_path):
    (tmp_path / "conftest.py").write_text(textwrap.dedent(CONFTEST))
    (tmp_path / "test_hung.py").write_text(textwrap.dedent(HUNG_TEST))
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                           "test_hung.py"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=80)
    out = done.stdout + done.stderr
    assert done.returncode != 0, out[-3000:]
    # the ranks' own dumps (thread method: "Stack of <thread>"), naming where each hangs
    assert out.count("every_rank_hangs_here") >= 2, out[-3000:]
    assert "Stack of MainThread" in out, out[-3000:]
