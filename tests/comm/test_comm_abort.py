"""A failing rank must end the whole MPI job quickly, saying who failed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import hpcrl.comm
from hpcrl.comm import install_abort_handler
from hpcrl.comm.abort import _failure_message

REPO_ROOT = Path(hpcrl.comm.__file__).resolve().parents[2]
ABORT_WITHIN_S = 10.0

# Rank 0 blocks forever in a receive; rank 1 fails in the way under test.
SCRIPT = textwrap.dedent(
    """
    import sys, threading
    from hpcrl.comm import abort_on_error, install_abort_handler, world_comm

    mode = sys.argv[1]
    comm = world_comm()
    describe = lambda: f"collector {comm.rank + 2}"

    def boom():
        raise RuntimeError("boom from the test")

    if comm.rank == 0:
        install_abort_handler(comm, describe)
        comm.recv(source=1)  # never satisfied
    elif mode == "excepthook":
        install_abort_handler(comm, describe)
        boom()
    elif mode == "context":
        with abort_on_error(comm, describe):
            boom()
    elif mode == "thread":
        install_abort_handler(comm, describe)
        threading.Thread(target=boom, name="sampler").start()
        comm.recv(source=0)  # main thread blocked, as in a real role
    """
)


def _mpiexec() -> str:
    found = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or shutil.which("mpiexec")
    if found is None:
        pytest.skip("no mpiexec on PATH")
    return found


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", ["excepthook", "context", "thread"])
def test_failing_rank_aborts_the_job(mode: str) -> None:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    start = time.monotonic()
    done = subprocess.run(
        [_mpiexec(), "-n", "2", sys.executable, "-c", SCRIPT, mode],
        env=env,
        capture_output=True,
        text=True,
        timeout=45,
    )
    elapsed = time.monotonic() - start
    assert done.returncode != 0
    assert elapsed < ABORT_WITHIN_S, f"job took {elapsed:.1f} s to end"
    assert "hpcrl: rank 1 (collector 3) failed:" in done.stderr, done.stderr
    assert "RuntimeError: boom from the test" in done.stderr
    if mode == "thread":
        assert "(in thread 'sampler')" in done.stderr


class _RecordingComm:
    def Get_rank(self) -> int:
        return 4


def test_failure_message_survives_a_broken_describe() -> None:
    try:
        raise ValueError("bad value")
    except ValueError as exc:
        message = _failure_message(_RecordingComm(), lambda: 1 / 0, exc, exc.__traceback__, "w")
    assert message.startswith("hpcrl: rank 4 (<describe() failed: ZeroDivisionError")
    assert "(in thread 'w')" in message and "ValueError: bad value" in message


def test_install_returns_a_restorer() -> None:
    before = sys.excepthook, threading.excepthook
    restore = install_abort_handler(_RecordingComm(), lambda: "updater")
    assert (sys.excepthook, threading.excepthook) != before
    restore()
    assert (sys.excepthook, threading.excepthook) == before


HANGING_ABORT = textwrap.dedent(
    """
    import threading, time
    import hpcrl.comm.abort as abort

    abort.ABORT_TIMEOUT_S = 1.0

    class StuckComm:  # an MPI whose Abort never returns (seen under ULFM after a loss)
        def Abort(self, code):
            while True:
                time.sleep(1)

    # from a daemon thread, as the failure watch ends a job
    threading.Thread(target=abort.abort_job, args=(StuckComm(), "the learner was lost"),
                     daemon=True).start()
    time.sleep(60)  # the main thread goes on working meanwhile
    """
)


@pytest.mark.timeout(60)
def test_a_rank_whose_abort_hangs_still_ends_with_status_1() -> None:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", HANGING_ABORT], capture_output=True,
                          text=True, timeout=30, cwd=REPO_ROOT)
    assert done.returncode == 1, done.stderr
    assert "hpcrl: the learner was lost" in done.stderr
    assert time.monotonic() - started < 20  # the 1 s bound, not the main thread's 60 s
