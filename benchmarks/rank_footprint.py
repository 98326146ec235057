"""Where a sleeping emulation rank's memory goes (benchmarks/emulation.py), to know how many
ranks fit on this machine: the proportional set size (PSS: shared pages split among the
processes that map them, so the ranks' sum is what they take; RSS counts each shared
library in full in every rank) and the anonymous memory after each import a rank makes,
then the peak of rank 1 of a 2-rank emulated DD-PPO job, with glibc's defaults and with
scaling.py's allocator settings (``MALLOC_ENV``).

    python benchmarks/rank_footprint.py --calibration RUN_DIR
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from machine import machine_line
from mpi_scaling import environment, mpiexec, python_ranks
from scaling import ENVS, MALLOC_ENV, STEPS, calibrate, config, gradient_step_seconds
from soak import rank_of

IMPORTS = ("numpy", "torch", "gymnasium", "mpi4py.MPI", "hpcrl", "hpcrl.cli")
STAGES = f"""
import importlib, sys
def footprint():
    f = {{}}
    for line in open('/proc/self/smaps_rollup'):
        key = line.split(':')[0]
        if key in ('Rss', 'Pss', 'Anonymous'):
            f[key] = int(line.split()[1]) // 1024
    return f
print('python', footprint())
for name in {IMPORTS!r}:
    importlib.import_module(name)
    print(name, footprint())
"""


def footprint(pid: int) -> dict[str, int]:
    """MB of RSS, PSS and anonymous memory of process ``pid`` (0s once it is gone)."""
    out = {"Rss": 0, "Pss": 0, "Anonymous": 0}
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            key = line.split(":")[0]
            if key in out:
                out[key] = int(line.split()[1]) // 1024
    except OSError:
        pass
    return out


def job_peak(cal: dict[str, float], extra: dict[str, str]) -> dict[str, int]:
    """Peak footprint of rank 1 of a 2-rank emulated DD-PPO job of 3 updates."""
    tmp = Path(tempfile.mkdtemp(prefix="hpcrl-footprint-"))
    (tmp / "cfg.yaml").write_text(yaml.safe_dump(config("ddppo", 2, 3)))
    env = environment({"HPCRL_EMU_STEP_S": f"{cal['collect_s'] / (STEPS * ENVS):.6f}",
                       "HPCRL_EMU_LOSS_S": f"{gradient_step_seconds('ddppo', cal):.6f}",
                       **extra})
    job = subprocess.Popen([mpiexec(), "-n", "2", sys.executable, "-m", "hpcrl.cli", "train",
                            str(tmp / "cfg.yaml"), "--run-dir", str(tmp / "run")], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak = {"Rss": 0, "Pss": 0, "Anonymous": 0}
    while job.poll() is None:
        time.sleep(0.3)
        for pid in python_ranks(job.pid):
            if rank_of(pid) == 1:
                peak = {k: max(v, footprint(pid)[k]) for k, v in peak.items()}
    return peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calibration", type=Path, default=None)
    args = parser.parse_args()
    print(machine_line())
    print(subprocess.run([sys.executable, "-c", STAGES], env=environment(), text=True,
                         capture_output=True, check=True).stdout, end="")
    cal = calibrate(args.calibration)
    print("rank 1 of 2, DD-PPO, glibc's defaults, MB:", job_peak(cal, {}))
    print("rank 1 of 2, DD-PPO, scaling.py's MALLOC_ENV, MB:", job_peak(cal, MALLOC_ENV))


if __name__ == "__main__":
    main()
