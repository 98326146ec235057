"""What the side-by-side benchmarks measure of a job: a whole process, imports included."""
from __future__ import annotations

import os
import subprocess
import time


def run_measured(cmd: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Run ``cmd`` to its end: its wall-clock seconds, its peak RSS in MB (from ``wait4``)
    and its stdout. A failing job stops the benchmark."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                            text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd[:4])} ... failed with status {status}")
    return wall, usage.ru_maxrss / 1024, out
