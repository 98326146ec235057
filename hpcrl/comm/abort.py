"""Turn an uncaught exception on one rank into a prompt end of the whole job.

Without this, a rank that dies leaves its peers blocked in a receive or a
collective until the scheduler's wall-clock limit. Here the failing rank
prints who it was and why, then ends the job (:func:`~hpcrl.comm.job_end.end_job_now`:
``MPI_Abort``, or under Open MPI's ULFM a revocation and an exit), which makes the
launcher (mpiexec, srun) end every rank and exit non-zero within seconds.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import NoReturn

from hpcrl.comm._mpi import Comm
from hpcrl.comm.faults import die_as_lost, send_last_words
from hpcrl.comm.job_end import FAILED, end_job_now, is_revocation, leave_revoked
from hpcrl.errors import ExplainedError

_report_lock = threading.Lock()
ABORT_GRACE_S = 0.5
# how long MPI_Abort may take before this rank ends itself: under Open MPI's ULFM an Abort
# issued after a rank died was seen to leave the job running (twice in about 40 kills of a
# learner under load), and a job that must end may not wait on the launcher
ABORT_TIMEOUT_S = 10.0


class _Expendable:
    """Whether this rank's failure leaves the job going (a collector of a job that survives
    lost collectors), and how to tell that a rank the job cannot lose died too."""

    def __init__(self) -> None:
        self.enabled = False
        self.essential_lost: Callable[[], str | None] = lambda: None


EXPENDABLE = _Expendable()


def set_expendable(enabled: bool, essential_lost: Callable[[], str | None] | None = None
                   ) -> None:
    """Make this rank's uncaught failures end this rank alone (``enabled``): it says why,
    sends its last words to rank 0 and dies as a crash does, which the others survive;
    unless ``essential_lost()`` names a dead rank the job cannot do without (the failure was
    its consequence), when the whole job ends as before."""
    EXPENDABLE.enabled = enabled
    EXPENDABLE.essential_lost = essential_lost or (lambda: None)


def install_abort_handler(comm: Comm, describe: Callable[[], str]) -> Callable[[], None]:
    """Abort ``comm`` on any uncaught exception, in the main or any other thread.

    ``describe()`` names the rank's role for the message (e.g. "collector 3");
    it is called only on failure, so it may report state that changes. Pass
    the world communicator: the MPI standard only promises to abort the group
    of ``comm`` (MPICH and Open MPI end the whole job either way). Returns a
    function that puts the previous hooks back.
    """
    previous_sys, previous_thread = sys.excepthook, threading.excepthook

    def sys_hook(
        exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None
    ) -> None:
        report_and_abort(comm, describe, exc, tb)

    def thread_hook(args: threading.ExceptHookArgs) -> None:
        if args.exc_type is SystemExit:  # threading ignores it too
            return
        thread = args.thread.name if args.thread is not None else "?"
        report_and_abort(comm, describe, args.exc_value, args.exc_traceback, thread=thread)

    sys.excepthook = sys_hook
    threading.excepthook = thread_hook

    def restore() -> None:
        sys.excepthook, threading.excepthook = previous_sys, previous_thread

    return restore


@contextmanager
def abort_on_error(comm: Comm, describe: Callable[[], str]) -> Iterator[None]:
    """Run the ``with`` body (a role's loop); abort ``comm`` if it raises.

    ``sys.exit()`` with status 0 or None passes through; any other exit,
    KeyboardInterrupt included, aborts the job like an error does.
    """
    try:
        yield
    except SystemExit as exc:
        if exc.code in (None, 0):
            raise
        report_and_abort(comm, describe, exc, exc.__traceback__)
    except BaseException as exc:
        report_and_abort(comm, describe, exc, exc.__traceback__)


def report_and_abort(
    comm: Comm,
    describe: Callable[[], str],
    exc: BaseException | None,
    tb: TracebackType | None,
    *,
    thread: str | None = None,
) -> NoReturn:
    """Print ``hpcrl: rank R (role) failed:`` and the traceback, then abort."""
    with _report_lock:  # a second failing thread waits here for the abort
        if exc is not None and is_revocation(exc):
            leave_revoked()  # another rank ended the job and said why
        message = _failure_message(comm, describe, exc, tb, thread)
        if EXPENDABLE.enabled:
            _leave_alone(comm, message, exc)
        _say_and_abort(comm, message)


def _say_and_abort(comm: Comm, text: str) -> NoReturn:
    """Write ``text`` to standard error unbuffered (whatever ``sys.stderr`` is), then abort
    every rank of ``comm``."""
    stream = sys.stderr if sys.stderr is not None else sys.__stderr__
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
        if stream is not None:
            stream.flush()
        if text:
            os.write(2, text.encode(errors="replace"))
    except Exception:
        pass
    # The launcher forwards a rank's output through a proxy; give it a moment to pass the
    # report on before Abort makes it kill every rank.
    time.sleep(ABORT_GRACE_S)
    # if Abort hangs, this rank still ends (status 1), and so does every rank that aborts
    watchdog = threading.Timer(ABORT_TIMEOUT_S, os._exit, (FAILED,))
    watchdog.daemon = True
    watchdog.start()
    end_job_now(comm, FAILED)


def abort_job(comm: Comm, message: str) -> NoReturn:
    """End the whole job, whichever rank this is (a rank the job cannot lose was lost),
    saying ``message`` as ``hpcrl: ...`` on this rank's standard error (nothing if empty:
    another rank says it)."""
    _say_and_abort(comm, f"hpcrl: {message}\n" if message else "")


def _leave_alone(comm: Comm, message: str, exc: BaseException | None) -> None:
    """An expendable rank's failure: said, sent to rank 0 as its last words, then the rank
    dies (returns only where an essential rank is dead too: the job then ends)."""
    essential = EXPENDABLE.essential_lost()
    if essential is not None:
        abort_job(comm, essential)
    summary = (f"{type(exc).__name__}: {exc}" if exc is not None else "failed").strip()
    try:
        os.write(2, (message + "hpcrl: the job goes on without this rank\n").encode(
            errors="replace"))
    except Exception:
        pass
    send_last_words(comm, summary.splitlines()[0][:500] if summary else "failed")
    time.sleep(ABORT_GRACE_S)
    die_as_lost()


def _failure_message(
    comm: Comm,
    describe: Callable[[], str],
    exc: BaseException | None,
    tb: TracebackType | None,
    thread: str | None,
) -> str:
    """The report: header naming rank and role, optional thread, traceback (or only the
    message of an :class:`~hpcrl.errors.ExplainedError`)."""
    try:
        rank: object = comm.Get_rank()
    except Exception:
        rank = "?"
    try:
        role = describe()
    except Exception as err:
        role = f"<describe() failed: {err!r}>"
    lines = [f"hpcrl: rank {rank} ({role}) failed:\n"]
    if thread is not None:
        lines.append(f"(in thread {thread!r})\n")
    if isinstance(exc, ExplainedError):  # its message says all: no traceback
        lines.append(f"hpcrl: {exc}\n")
    elif exc is not None:
        lines.extend(traceback.format_exception(type(exc), exc, tb))
    return "".join(lines)
