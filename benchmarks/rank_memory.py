"""Peak resident memory of each rank of an ``mpiexec`` job, sampled while it runs."""
from __future__ import annotations

import os
import signal
import subprocess
import time

from mpi_scaling import environment, python_ranks
from soak import rank_of, rss_bytes


def run_sampling_ranks(cmd: list[str], ranks: int, interval_s: float = 0.2) -> list[float]:
    """Run the ``mpiexec -n ranks ...`` command ``cmd`` to its end and return each rank's
    peak VmRSS in MB (sampled every ``interval_s``); a failing job stops the benchmark with
    the end of its stderr."""
    job = subprocess.Popen(cmd, env=environment(), stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, start_new_session=True)
    peaks = [0] * ranks
    pids: dict[int, int] = {}
    try:
        while job.poll() is None:
            time.sleep(interval_s)
            if len(pids) < ranks:
                pids = {r: p for p in python_ranks(job.pid) if (r := rank_of(p)) is not None}
            for r, pid in pids.items():
                peaks[r] = max(peaks[r], rss_bytes(pid))
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
        _, err = job.communicate()
    if job.returncode != 0:
        raise SystemExit(f"the run failed ({job.returncode}):\n"
                         f"{err.decode(errors='replace')[-2000:]}")
    return [p / 2**20 for p in peaks]
