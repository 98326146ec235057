"""Reliability of the `apex` preset: its defaults on CartPole-v1, 100k env steps, 5 seeds.

Each seed runs the command a user runs,

    mpiexec -n 3 hpcrl train --set scheme.preset=apex --set train.total_env_steps=100000 \\
        --set seed=S --run-dir DIR

one after the other, and reads the final deterministic evaluation (10 episodes) from
DIR/eval.json. Target: at least 4 of 5 seeds score >= 400.

    python benchmarks/apex_seeds.py [--seeds 0 1 2 3 4] [--steps 100000] [--set KEY=VALUE ...]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path

from machine import machine_line
from mpi_scaling import command, environment

TARGET = 400.0


def run_seed(seed: int, steps: int, extra: list[str]) -> tuple[float, float]:
    """The mean eval return of one seed, and the job's wall-clock seconds."""
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        sets = ["scheme.preset=apex", f"train.total_env_steps={steps}", f"seed={seed}",
                *extra]
        start = time.monotonic()
        done = subprocess.run(command(3, run_dir, sets), env=environment(), text=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wall = time.monotonic() - start
        if done.returncode != 0:
            raise SystemExit(f"seed {seed} failed (exit {done.returncode}):\n"
                             f"{done.stderr[-3000:]}")
        return json.loads((run_dir / "eval.json").read_text())["mean_return"], wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--set", dest="sets", action="append", default=[],
                        metavar="KEY=VALUE", help="extra config keys (default: none)")
    args = parser.parse_args()
    print(machine_line(), flush=True)
    scores = []
    for seed in args.seeds:
        score, wall = run_seed(seed, args.steps, args.sets)
        scores.append(score)
        print(f"seed {seed}: eval {score:.1f} ({wall:.0f} s)", flush=True)
    passed = sum(s >= TARGET for s in scores)
    print(f"{passed} of {len(scores)} seeds >= {TARGET:.0f} "
          f"(target: at least {len(scores) - 1})")


if __name__ == "__main__":
    main()
