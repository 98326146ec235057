"""Figures of the crashing-env jobs (docs/reliability.md): what envs that crash at random
cost a PPO job on CartPole, like RLlib's crashing-env tuned examples.

Each job runs ``--steps`` env steps with seed 1, its every env crashing in step and reset at
a tenth of RLlib's rates (1e-4, 1e-3) and at RLlib's own (5e-4, 5e-3), and once without
crashes; in one process, on DD-PPO (2 ranks, MPICH) and on async-ppo (4 ranks: 3 collectors,
Open MPI with ULFM). Per job: the faults the envs injected (their own log), the envs hpcrl
made again (progress.csv and eval.json), the steps lost (a step that crashed teaches nothing;
a reset that crashed loses none), the live collectors at the end, the final evaluation over
10 episodes, the wall-clock, and, in one process where it can be timed, the time one
restart took (closing the env, making it, resetting it).

    python benchmarks/crashing_envs.py             # about 3 minutes on 2 cores
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "placement" / "mpi"), str(ROOT)]

import hpcrl_crashing as crashing_envs  # noqa: E402
import openmpi as ompi  # noqa: E402
from mpirun import mpiexec, rows  # noqa: E402


def steps_lost(log: str) -> int:
    """Steps that teach nothing: one per crash in step (a crash in reset loses none)."""
    try:
        with open(log) as f:
            return sum(1 for line in f if line.startswith("step"))
    except FileNotFoundError:
        return 0


def serial(sets: list[str], run_dir: Path, env: dict[str, str]) -> list[float]:
    """Train in this process; returns the seconds of each restart (close, make, reset)."""
    from hpcrl.config import from_dict
    from hpcrl.envs.restarts import RestartingEnv
    from hpcrl.placement.serial_run import Trainer
    from hpcrl.runtime.run_dir import RunDir

    took: list[float] = []
    make_again, first_reset = RestartingEnv._make_again, RestartingEnv._first_reset
    started: dict[int, float] = {}

    def timed_make(self: RestartingEnv) -> None:
        started[id(self)] = time.perf_counter()
        make_again(self)

    def timed_reset(self: RestartingEnv, *args: object) -> object:
        out = first_reset(self, *args)
        took.append(time.perf_counter() - started.pop(id(self)))
        return out

    os.environ.update(env)
    names = ("_make_again", "_first_reset")
    for name, method in zip(names, (timed_make, timed_reset), strict=True):
        setattr(RestartingEnv, name, method)
    try:
        Trainer(from_dict({}, sets), RunDir(run_dir), console=None).train()
    finally:
        for name, method in zip(names, (make_again, first_reset), strict=True):
            setattr(RestartingEnv, name, method)
        os.environ.pop("HPCRL_CRASH_LOG", None)
    return took


def launched(command: list[str], env: dict[str, str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=600)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20000)
    args = parser.parse_args()
    common = [f"train.total_env_steps={args.steps}", "train.eval_episodes=10",
              "train.tensorboard=false", "train.log_interval_s=60", "seed=1"]
    rates = {"none": [], **{r: crashing_envs.crashing(r) for r in crashing_envs.RATES}}
    prefix = ompi.install()
    print(f"{'job':<10} {'crashes':<7} {'faults':>6} {'restarts':>8} {'lost steps':>10} "
          f"{'live':>4} {'return':>7} {'wall s':>7} {'restart ms':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        for job in ("serial", "ddppo", "async-ppo"):
            for rate, crash in rates.items():
                run_dir, log = Path(tmp) / f"{job}-{rate}", Path(tmp) / f"{job}-{rate}.log"
                env = {"HPCRL_CRASH_LOG": str(log), "OMP_NUM_THREADS": "1"}
                sets = ([] if crash else ["env.id=hpcrl_crashing:CrashingCartPole-v0"]) \
                    + crash + common
                start, took = time.perf_counter(), []
                if job == "serial":
                    took = serial(sets, run_dir, env)
                else:
                    n, scheme = (2, ["scheme.preset=ddppo"]) if job == "ddppo" else (
                        4, ["scheme.preset=async-ppo", "scheme.collectors_per_worker=3",
                            "algo.ppo.minibatch_size=192"])
                    argv = ["train", "--run-dir", str(run_dir)]
                    for item in scheme + sets:
                        argv += ["--set", item]
                    if job == "ddppo":
                        command = [mpiexec(), "-n", str(n), sys.executable, "-m", "hpcrl.cli",
                                   *argv]
                        full = {**os.environ, **env, "PYTHONPATH": os.pathsep.join(
                            [str(ROOT / "tests" / "placement" / "mpi"), str(ROOT)])}
                    else:
                        command = ompi.hpcrl_command(prefix, n, argv)
                        full = ompi.environment(prefix, env)
                    launched(command, full)
                wall = time.perf_counter() - start
                trained, evaluated = crashing_envs.restarts_counted(str(run_dir))
                ret = json.loads((run_dir / "eval.json").read_text())["mean_return"]
                live = rows(run_dir)[-1].get("live_collectors", "-") or "-"
                ms = f"{1e3 * statistics.median(took):.2f}" if took else "-"
                print(f"{job:<10} {rate:<7} {crashing_envs.faults_logged(str(log)):>6} "
                      f"{trained + evaluated:>8} {steps_lost(str(log)):>10} {live:>4} "
                      f"{ret:>7.1f} {wall:>7.1f} {ms:>10}", flush=True)


if __name__ == "__main__":
    main()
