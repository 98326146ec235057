"""MPI scheme figures on this machine, each from real `mpiexec ... hpcrl train` jobs:

1. collection throughput with 1 and 2 collector ranks (asynchronous collection, a light
   learner), and the ratio;
2. a straggler (one collector rank 4x slower per step): env steps/s of synchronous
   collection, synchronous with preemption, and asynchronous collection (target: both of
   the latter >= 1.3x synchronous);
3. start-up: `mpiexec -n 4` to the first env step on every rank (target < 3 s; Ray's
   `ray.init` alone is about 4 s here), and the memory of that 4-rank job as the sum of
   the ranks' PSS (target below RLlib's single-process PPO, 0.86 GB).

All-reduce latency per backend: `mpiexec -n 2 python benchmarks/allreduce.py`.

    python benchmarks/mpi_scaling.py
"""
from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from machine import machine_line

HERE = Path(__file__).resolve().parent
# what every benchmark job leaves out; a PPO job also trains one epoch a rollout (a key of
# PPO's own section, which the config refuses for IMPALA, Ape-X and SAC jobs)
LIGHT = ["train.tensorboard=false", "train.eval_episodes=0", "train.log_interval_s=600"]
PPO_LIGHT = [*LIGHT, "algo.ppo.num_epochs=1"]


def mpiexec() -> str:
    return shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or "mpiexec"


def as_args(sets: list[str]) -> list[str]:
    """``--set KEY=VALUE`` pairs for the command line."""
    return [arg for item in sets for arg in ("--set", item)]


def train_argv(run_dir: Path, sets: list[str]) -> list[str]:
    """``python -m hpcrl.cli train`` of one process (a serial run, or one rank's command)."""
    return [sys.executable, "-m", "hpcrl.cli", "train", "--run-dir", str(run_dir),
            *as_args(sets)]


def command(n: int, run_dir: Path, sets: list[str]) -> list[str]:
    """``hpcrl train`` under ``mpiexec -n n``."""
    return [mpiexec(), "-n", str(n), *train_argv(run_dir, sets)]


def plan(recipe: Path | None, sets: list[str],
         env: dict[str, str] | None = None) -> dict[str, Any]:
    """``hpcrl plan --json`` of the recipe (the embedded default without one) under ``sets``:
    world size, total envs, ranks; ``env`` picks the process environment (the hpcrl tree on
    its PYTHONPATH), :func:`environment` by default."""
    recipe_arg = [str(recipe)] if recipe is not None else []
    done = subprocess.run([sys.executable, "-m", "hpcrl.cli", "plan", *recipe_arg, "--json",
                           *as_args(sets)], capture_output=True, text=True,
                          env=env or environment())
    if done.returncode != 0:
        raise SystemExit(f"hpcrl plan refused {sets}: {done.stderr.strip()[-800:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1",
            "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
            **(extra or {})}


def progress_rows(run_dir: Path) -> list[dict[str, str]]:
    """The rows of a run's ``progress.csv``, by column name."""
    with open(run_dir / "progress.csv", newline="") as f:
        return list(csv.DictReader(f))


def steps_per_second(rows: list[dict[str, str]]) -> float:
    """Env steps per second over the updates after the first row (start-up and first-call
    costs excluded); nan with a single row."""
    first, last = rows[0], rows[-1]
    span = float(last["wall_time_s"]) - float(first["wall_time_s"])
    steps = float(last["env_steps"]) - float(first["env_steps"])
    return steps / span if span > 0 else float("nan")


def fps_of(n: int, sets: list[str], extra: dict[str, str] | None = None) -> float:
    """Env steps per second over the job's updates after the first (start-up excluded)."""
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(command(n, Path(tmp) / "run", PPO_LIGHT + sets), check=True,
                       env=environment(extra), stderr=subprocess.DEVNULL)
        return steps_per_second(progress_rows(Path(tmp) / "run"))


def pss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def descendants(pid: int) -> list[int]:
    out, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        for child in Path(f"/proc/{parent}/task/{parent}/children").read_text().split() \
                if Path(f"/proc/{parent}/task/{parent}/children").exists() else []:
            out.append(int(child))
            frontier.append(int(child))
    return out


def python_ranks(pid: int) -> list[int]:
    ranks = []
    for child in descendants(pid):
        try:
            if "python" in Path(f"/proc/{child}/comm").read_text():
                ranks.append(child)
        except OSError:
            pass
    return ranks


def startup_and_memory() -> tuple[float, float, float]:
    """Seconds from launch to the last rank's first env step, and peak summed PSS (GB)."""
    sets = PPO_LIGHT + ["scheme.preset=a2c", "scheme.collectors_per_worker=3",
                    "env.id=bench_envs:StampedCartPole-v0", "train.total_env_steps=98304",
                    "algo.ppo.minibatch_size=768"]
    with tempfile.TemporaryDirectory() as tmp:
        stamps = Path(tmp) / "stamps"
        stamps.mkdir()
        start = time.time()
        job = subprocess.Popen(command(4, Path(tmp) / "run", sets),
                               env=environment({"HPCRL_BENCH_STAMP_DIR": str(stamps)}),
                               stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        peak, peak_single = 0, 0
        while job.poll() is None:
            ranks = python_ranks(job.pid)
            sizes = [pss_kb(p) for p in ranks]
            if len(sizes) == 4:
                peak = max(peak, sum(sizes))
                peak_single = max(peak_single, max(sizes))
            time.sleep(0.2)
        first_steps = [float(p.read_text()) for p in stamps.iterdir()]
    ready = max(first_steps) - start if len(first_steps) == 3 else float("nan")
    return ready, peak / 2**20, peak_single / 2**20


def main() -> None:
    print(machine_line(), flush=True)
    print("MPI scheme figures (pip MPICH, 2 cores, OMP_NUM_THREADS=1)")
    one = fps_of(2, ["scheme.preset=async-ppo", "scheme.collectors_per_worker=1",
                     "train.total_env_steps=61440", "algo.ppo.minibatch_size=256"])
    two = fps_of(3, ["scheme.preset=async-ppo", "scheme.collectors_per_worker=2",
                     "train.total_env_steps=61440", "algo.ppo.minibatch_size=512"])
    print(f"collection, async, 1 collector rank : {one:9,.0f} env steps/s")
    print(f"collection, async, 2 collector ranks: {two:9,.0f} env steps/s  ({two / one:.2f}x)")

    slow = {"HPCRL_BENCH_SLOW_RANKS": "2", "HPCRL_BENCH_SLOW_SECONDS": "0.0002"}
    base = ["scheme.preset=a2c", "env.id=bench_envs:StragglerCartPole-v0",
            "train.total_env_steps=40960"]
    sync = fps_of(3, base, slow)
    preempt = fps_of(3, base + ["scheme.preemption.fraction_workers=0.5",
                                "scheme.preemption.fraction_samples=0.25"], slow)
    asynchronous = fps_of(3, base + ["scheme.collection=async", "scheme.max_policy_lag=8"], slow)
    print(f"straggler, synchronous              : {sync:9,.0f} env steps/s")
    print(f"straggler, synchronous + preemption : {preempt:9,.0f} env steps/s  "
          f"({preempt / sync:.2f}x, target >= 1.3)")
    print(f"straggler, asynchronous             : {asynchronous:9,.0f} env steps/s  "
          f"({asynchronous / sync:.2f}x, target >= 1.3)")

    ready, pss, single = startup_and_memory()
    print(f"start-up, mpiexec -n 4 to the first env step of every collector: {ready:.2f} s "
          f"(target < 3 s; ray.init alone ~4 s)")
    print(f"memory, 4-rank job, peak sum of PSS: {pss:.2f} GB (largest rank {single:.2f} GB; "
          f"target < 0.86 GB, RLlib single-process PPO)")


if __name__ == "__main__":
    main()
