"""Members as the ranks of one launch: ``mpiexec -n M hpcrl pbt ...`` or ``srun -n M hpcrl pbt
...`` in one allocation, rank k training member k.

Each rank supervises its member rather than being it: the member trains in a child process
(``hpcrl pbt --run-dir POP --member K``, given an environment without the launcher's
variables, so it is a process of its own and no rank of a world), and the rank starts it
again from its own checkpoint when it dies (a segfault, a kill, a lost GPU), up to
``restarts`` times: a requeue within the allocation. The launcher never sees a member die,
so it never ends the other ranks for it (MPICH's mpiexec ends every process of a launch when
one is killed by a signal; a plain non-zero exit it leaves alone). A stop signal (SIGTERM,
SIGUSR1, Ctrl-C) is passed on to the member, which checkpoints and stops; the rank then
leaves with the member's status.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from hpcrl.placement.launch import LAUNCHER_RANK_VARS, LAUNCHER_SIZE_VARS
from hpcrl.runtime.refused import EXIT_REFUSED
from hpcrl.runtime.signals import EXIT_ENV_FAILED, EXIT_PREEMPTED

__all__ = ["LAUNCHER_PREFIXES", "member_environment", "supervise"]

# what a launcher puts in its processes' environment besides the sizes and ranks: the
# process-management interface's addresses (a member must not join the launch's world)
LAUNCHER_PREFIXES = ("PMI_", "PMIX_", "OMPI_", "HYDRA_", "MPI_LOCAL")
# statuses after which the member is not started again: done, stopped at a checkpoint, an
# env that failed for good (checkpointed), a refused config
FINAL_STATUSES = (0, EXIT_PREEMPTED, EXIT_ENV_FAILED, EXIT_REFUSED)


def member_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` without what makes a process a rank of the launch."""
    launch = set(LAUNCHER_SIZE_VARS) | set(LAUNCHER_RANK_VARS)
    return {k: v for k, v in environ.items()
            if k not in launch and not k.startswith(LAUNCHER_PREFIXES)}


def supervise(root: Path, member: int, restarts: int,
              say: Callable[[str], None] = print) -> int:
    """Train ``member`` of the population in ``root`` in a child process, starting it again
    from its checkpoint after it dies, ``restarts`` times at most; its last status."""
    command = [sys.executable, "-m", "hpcrl.cli", "pbt", "--run-dir", str(root), "--member",
               str(member)]
    child: subprocess.Popen[bytes] | None = None
    stopped: list[int] = []

    def forward(signum: int, frame: object) -> None:
        stopped.append(signum)
        if child is not None and child.poll() is None:
            child.send_signal(signum)

    previous = {s: signal.signal(s, forward)
                for s in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)}
    try:
        status = 0
        for attempt in range(restarts + 1):
            child = subprocess.Popen(command, env=member_environment(os.environ))
            status = _wait(child)
            if status in FINAL_STATUSES or stopped:
                return status
            if attempt < restarts:
                say(f"hpcrl pbt: member {member} ended with status {status}: starting it again "
                    f"from its checkpoint ({attempt + 1} of --restarts {restarts})")
        say(f"hpcrl pbt: member {member} ended with status {status} after {restarts} "
            f"restarts; the other members go on")
        return status
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _wait(child: subprocess.Popen[bytes]) -> int:
    """The child's exit status once it has ended (a signal that interrupts the wait is
    passed on by the handler, and the wait goes on); a death by a signal as 128 + signal."""
    while True:
        try:
            code = child.wait()
        except InterruptedError:  # (PEP 475 retries; kept for a handler that raises)
            continue
        return 128 - code if code < 0 else code
