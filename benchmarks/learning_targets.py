"""Learning targets of the foundation, each from the CLI as a user runs it:

- the embedded default (PPO, CartPole-v1): mean deterministic return >= 475 over 10
  episodes within 100k env steps;
- PPO on Pendulum-v1 (examples/pendulum-ppo.yaml): mean return better than -400 by 200k.

    python benchmarks/learning_targets.py [--seeds 0 1 2]
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine import machine_line

ROOT = Path(__file__).resolve().parents[1]
JOBS = {
    "cartpole (default)": ([], 475.0),
    "pendulum": ([str(ROOT / "examples" / "pendulum-ppo.yaml")], -400.0),
}


def run(args: list[str], seed: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        hpcrl = Path(sys.executable).with_name("hpcrl")
        start = time.perf_counter()
        subprocess.run([str(hpcrl), "train", *args, "--run-dir", f"{tmp}/run", "--set",
                        f"seed={seed}"], check=True, stderr=subprocess.DEVNULL,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
        wall = time.perf_counter() - start
        result = json.loads(Path(f"{tmp}/run/eval.json").read_text())
        with open(f"{tmp}/run/progress.csv") as f:
            last = list(csv.DictReader(f))[-1]
    return {"wall_s": wall, "eval": result["mean_return"], "steps": int(last["env_steps"]),
            "train_mean": float(last["episode_return_mean"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--only", choices=list(JOBS), default=None)
    args = parser.parse_args()
    print(machine_line(), flush=True)
    print(f"{'job':>20} {'seed':>4} {'steps':>8} {'wall s':>7} {'eval':>8} {'train':>8} target")
    for name, (job_args, target) in JOBS.items():
        if args.only and name != args.only:
            continue
        for seed in args.seeds:
            r = run(job_args, seed)
            ok = "met" if r["eval"] >= target else "MISSED"
            print(f"{name:>20} {seed:>4} {r['steps']:>8} {r['wall_s']:7.1f} {r['eval']:8.1f} "
                  f"{r['train_mean']:8.1f} >= {target:g} {ok}")


if __name__ == "__main__":
    main()
