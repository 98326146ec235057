"""Keep the scheduler's stop signals away from the processes an env starts.

Slurm (``--signal=USR1@90``, ``scancel``) and ``mpiexec`` deliver SIGUSR1 and SIGTERM to every
process of a job step, the children a collector's envs started included: ViZDoom's engine,
the subprocesses of ``env.vectorization=async``. A rank catches these signals and stops at
its next consistent point with a checkpoint (:mod:`hpcrl.runtime.signals`), but a child that
never installed a handler dies of them at once, and its rank then fails mid-update instead
of checkpointing: a preempted job would lose its work since the last periodic checkpoint.

A process inherits the blocked-signal mask of the thread that started it (through ``fork``
and ``exec`` alike), so starting env processes with the stop signals blocked keeps those
signals pending there forever, unseen; the rank's own mask is restored at once, so it
receives them as before. An env's processes still end with it (``close``) or with the job
(SIGKILL).
"""
from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

STOP_SIGNALS = (signal.SIGUSR1, signal.SIGTERM)


@contextmanager
def stop_signals_held() -> Iterator[None]:
    """Block :data:`STOP_SIGNALS` in this thread while the block runs, so that every process
    started in it keeps them blocked; a stop signal that arrives meanwhile is delivered
    to this process when the block ends."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
