"""What the side-by-side benchmarks measure of a job: a whole process, imports included."""
from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Measured:
    """A whole job: wall-clock and CPU (user + system) seconds, peak RSS in MB, stdout."""

    wall_s: float
    cpu_s: float
    rss_mb: float
    out: str


def measure(cmd: list[str], env: dict[str, str]) -> Measured:
    """Run ``cmd`` to its end and measure it (``wait4``'s usage, children of the job
    included in neither: the jobs here are one process). A failing job stops the
    benchmark."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                            text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd[:4])} ... failed with status {status}")
    return Measured(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, out)


def run_measured(cmd: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """:func:`measure`'s wall-clock seconds, peak RSS in MB and stdout."""
    done = measure(cmd, env)
    return done.wall_s, done.rss_mb, done.out
