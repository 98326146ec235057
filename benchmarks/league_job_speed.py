"""A league job's env steps per second against the same config with one policy (issue 53).

Runs, one after the other on this machine, tic-tac-toe self-play (PPO, 8 envs a rank, the
serial scheme per policy) as:

- ``one``: one trained policy (no ``policies`` section), ``mpiexec -n 1``;
- ``league``: the same config with ``--policies`` trained policies (a main and exploiters),
  ``mpiexec -n P``, each policy a job of its own on one rank.

Each job trains ``--steps`` env steps per policy. Prints the machine, each job's wall time
and env steps per second (every policy's steps together, from the first update's start to
the last progress row: start-up and evaluation left out), and the league's ratio per
policy and in all. On C cores a league of P <= C policies should give about P times the
steps of one policy; past C, ranks share the cores.

    python benchmarks/league_job_speed.py [--policies 2] [--steps 20000]
"""
from __future__ import annotations

import argparse
import csv
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import machine_line  # noqa: E402

CONFIG: dict[str, Any] = {
    "env": {"id": "pettingzoo.classic.tictactoe_v3", "num_envs": 8,
            "league": {"snapshot_every": 4000}},
    "algo": {"name": "ppo", "num_steps": 64, "lr": 0.001, "ent_coef": 0.01},
    "actor": {"action_mask": True, "hidden_sizes": [64, 64]},
    "train": {"eval_episodes": 0, "log_interval_s": 1},
}


def mpiexec() -> str:
    """The mpiexec next to this python (the one mpi4py's library came with)."""
    found = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or shutil.which(
        "mpiexec")
    if found is None:
        raise SystemExit("mpiexec not found: pip install -e '.[test]'")
    return found


def steps_per_second(progress: Path) -> tuple[int, float]:
    """(env steps, env steps per second) of a run's progress rows, from its first row to
    its last (start-up and the first update's warm-up left out)."""
    with progress.open() as src:
        rows = list(csv.DictReader(src))
    first, last = rows[0], rows[-1]
    steps = int(last["env_steps"]) - int(first["env_steps"])
    return int(last["env_steps"]), steps / max(float(last["wall_time_s"])
                                               - float(first["wall_time_s"]), 1e-9)


def run_job(folder: Path, config: dict[str, Any], ranks: int) -> dict[str, Any]:
    """Train ``config`` on ``ranks`` ranks in ``folder``; its wall time and the env steps per
    second of each policy's run."""
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    started = time.perf_counter()
    done = subprocess.run([mpiexec(), "-n", str(ranks), sys.executable, "-m", "hpcrl.cli",
                           "train", str(path), "--run-dir", str(folder / "run")],
                          env=env, capture_output=True, text=True, timeout=3600)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    runs = sorted((folder / "run" / "policies").glob("*")) if config.get("policies") else [
        folder / "run"]
    rates = {run.name: steps_per_second(run / "progress.csv") for run in runs}
    return {"wall": wall, "rates": rates}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policies", type=int, default=2)
    parser.add_argument("--steps", type=int, default=20_000)
    args = parser.parse_args()
    print(machine_line(), flush=True)
    print(f"{os.cpu_count()} logical CPUs; tic-tac-toe self-play, PPO, 8 envs a rank, "
          f"{args.steps:,} env steps a policy", flush=True)
    base = {**CONFIG, "train": {**CONFIG["train"], "total_env_steps": args.steps}}
    names = ["main"] + [f"exploiter{i}" for i in range(1, args.policies)]
    league = {**base, "policies": {"main": {}, **{n: {"role": "main_exploiter"}
                                                  for n in names[1:]}}}
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "one").mkdir()
        (Path(tmp) / "league").mkdir()
        one = run_job(Path(tmp) / "one", base, 1)
        many = run_job(Path(tmp) / "league", league, args.policies)
    one_rate = next(iter(one["rates"].values()))[1]
    print(f"{'job':<34} {'wall s':>7} {'env steps/s':>12} {'vs one policy':>14}")
    print(f"{'one policy, 1 rank':<34} {one['wall']:>7.1f} {one_rate:>12,.0f} {1.0:>14.2f}")
    total = 0.0
    for name, (_, rate) in many["rates"].items():
        total += rate
        print(f"{'  policy ' + name:<34} {'':>7} {rate:>12,.0f} {rate / one_rate:>14.2f}")
    print(f"{f'league of {args.policies} policies, {args.policies} ranks':<34} "
          f"{many['wall']:>7.1f} {total:>12,.0f} {total / one_rate:>14.2f}")


if __name__ == "__main__":
    main()
