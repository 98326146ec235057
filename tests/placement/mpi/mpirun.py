"""Run hpcrl under a real ``mpiexec`` from a test, with a timeout, and read what it wrote."""
from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
ROOT = HERE.parents[2]
FAST = ["train.tensorboard=false", "train.eval_episodes=0", "train.log_interval_s=60"]

# For runs whose weights are compared with another layout's (two gradient ranks against one
# process). Adam steps a weight by lr * m / (sqrt(v) + eps): for a gradient near eps (1e-5 by
# default) it turns the rounding-level difference between an all-reduce of two half batches
# and one whole batch into a step of up to about lr. Which weights it hits depends on the
# CPU's kernels: a ResNet's weights matched to 1e-5 with AVX-512 kernels and differed by 5e-5
# in 338 of 212,260 with AVX2 ones (the README test's one failure, on an AVX2-only machine).
# With eps 1e-3 the step stays linear in such gradients and the layouts agree to 1e-7.
ROUNDING_SAFE_ADAM = "algo.optimizer_eps=1e-3"


def mpiexec() -> str:
    found = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or shutil.which("mpiexec")
    assert found, "mpiexec not found: install the test extra (pip install -e '.[test]')"
    return found


def run(n: int, args: list[str], sets: list[str], env: dict[str, str] | None = None,
        timeout: float = 120, script: Path | None = None,
        cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``mpiexec -n N hpcrl ARGS --set ...`` in ``cwd`` (default: the checkout); a hang fails
    the test at ``timeout``."""
    program = ([sys.executable, str(script)] if script is not None
               else [sys.executable, "-m", "hpcrl.cli"])
    cmd = [mpiexec(), "-n", str(n), *program, *args]
    for item in sets:
        cmd += ["--set", item]
    full_env = {**os.environ, "OMP_NUM_THREADS": "1",
                "PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT), str(ROOT / "examples"),
                                               os.environ.get("PYTHONPATH", "")]),
                **(env or {})}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=full_env,
                          cwd=cwd or ROOT)


def train(n: int, run_dir: Path, sets: list[str], **kw) -> subprocess.CompletedProcess:
    done = run(n, ["train", "--run-dir", str(run_dir)], FAST + sets, **kw)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def rows(run_dir: Path) -> list[dict[str, str]]:
    with open(run_dir / "progress.csv") as f:
        return list(csv.DictReader(f))


def column(run_dir: Path, name: str) -> list[float]:
    return [float(r[name]) for r in rows(run_dir)]


def start_training(n: int, run_dir: Path, sets: list[str],
                   config: Path | None = None) -> subprocess.Popen:
    """``mpiexec -n N hpcrl train [CONFIG]`` in the background (for signal tests)."""
    cmd = [mpiexec(), "-n", str(n), sys.executable, "-m", "hpcrl.cli", "train",
           *([str(config)] if config is not None else []), "--run-dir", str(run_dir)]
    for item in FAST + sets:
        cmd += ["--set", item]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"})


def signal_after_rows(job: subprocess.Popen, run_dir: Path, count: int, signum: int,
                      within_s: float = 60) -> None:
    """Send ``signum`` to the job once ``progress.csv`` holds more than ``count`` rows."""
    import time

    progress = run_dir / "progress.csv"
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if progress.exists() and len(progress.read_text().splitlines()) > count + 1:
            break
        time.sleep(0.1)
    job.send_signal(signum)  # mpiexec forwards it to every rank


def shared_dir(comm) -> Path:
    """A fresh temporary directory that every rank of ``comm`` gets (rank 0 makes it)."""
    path = tempfile.mkdtemp(prefix="hpcrl-mpi-") if comm.rank == 0 else None
    return Path(comm.bcast(path, root=0))
