"""Stop requests from the scheduler: checkpoint at the next consistent point, then exit.

Slurm sends the warning signal (``--signal=B:USR1@90``, forwarded to the job step by the
batch script) before a time limit or preemption, and SIGTERM when it ends a job. Both only
set a flag here; the training loop reads it at the end of an update, writes one checkpoint
and stops. The process then exits with :data:`EXIT_PREEMPTED`, which tells a batch script
to requeue the job; the restarted job resumes from that checkpoint.
"""
from __future__ import annotations

import signal
import sys
from collections.abc import Callable

from hpcrl.envs.child_signals import STOP_SIGNALS

EXIT_PREEMPTED = 3
# checkpointed and stopped because an env failed for good (hpcrl.placement.env_failures):
# the Slurm templates requeue it only while it makes progress (a flaky env may come back,
# a broken one must not requeue for ever)
EXIT_ENV_FAILED = 4


class StopRequest:
    """Whether a stop signal arrived, and which."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.announce = True  # say so on stderr; an MPI job lets rank 0 alone speak

    @property
    def requested(self) -> bool:
        """Whether a stop signal arrived since :meth:`install`."""
        return self.signum is not None

    def _handle(self, signum: int, frame: object) -> None:
        if self.signum is None and self.announce:
            print(f"hpcrl: received {signal.Signals(signum).name}: checkpointing at the end of "
                  f"this update, then stopping", file=sys.stderr, flush=True)
        self.signum = signum

    def install(self) -> Callable[[], None]:
        """Catch the stop signals from now on, forgetting one that stopped an earlier run of
        this process (the API may train again after a stop); returns a function that restores
        the old handlers."""
        self.signum = None
        previous = {s: signal.signal(s, self._handle) for s in STOP_SIGNALS}

        def restore() -> None:
            for s, handler in previous.items():
                signal.signal(s, handler)
        return restore

    def clear(self) -> None:
        """Forget a stop signal that arrived."""
        self.signum = None


STOP_REQUEST = StopRequest()
