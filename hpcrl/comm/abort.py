"""Turn an uncaught exception on one rank into a prompt abort of the whole job.

Without this, a rank that dies leaves its peers blocked in a receive or a
collective until the scheduler's wall-clock limit. Here the failing rank
prints who it was and why, then calls ``comm.Abort(1)``, which makes the
launcher (mpiexec, srun) kill every rank and exit non-zero within seconds.
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
from hpcrl.errors import ExplainedError

_report_lock = threading.Lock()
ABORT_GRACE_S = 0.5


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
        message = _failure_message(comm, describe, exc, tb, thread)
        stream = sys.stderr if sys.stderr is not None else sys.__stderr__
        try:
            if sys.stdout is not None:
                sys.stdout.flush()
            if stream is not None:
                stream.flush()
            os.write(2, message.encode(errors="replace"))  # unbuffered, whatever sys.stderr is
        except Exception:
            pass
        # The launcher forwards a rank's output through a proxy; give it a moment to pass the
        # report on before Abort makes it kill every rank.
        time.sleep(ABORT_GRACE_S)
        try:
            comm.Abort(1)
        finally:
            os._exit(1)  # only reached if Abort itself failed or returned


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
