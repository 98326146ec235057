"""Sample efficiency and wall-clock of MPC against SAC on Pendulum-v1: each recipe
(examples/mpc-pendulum.yaml, examples/sac-pendulum.yaml) trained once per seed, its policy
scored after 5k and after 10k env steps.

A job trains its recipe to the first point in a process of its own (``hpcrl train``), is
scored, then resumes to the next point (``hpcrl train --resume --set
train.total_env_steps=...``: a resumed run ends with the weights of an uninterrupted one, and
both recipes keep a constant learning rate, so the budget does not change what they learn
before it) and is scored again. Every policy is scored by hpcrl's evaluator
(:func:`hpcrl.learning.evaluation.run_episodes`, MPC planning as its evaluation does) on the same
``--eval-episodes`` episodes, whose start states come from one eval seed shared by every
job: Pendulum's return depends mostly on where the pendulum starts. "train s" is the
training loop (``progress.csv``'s ``wall_time_s``), "wall s" the training processes whole
(imports and start-up included), "cpu s" their CPU seconds (what they cost whatever else
the machine runs); the scoring counts in none. Jobs run one at a time, one thread each.

    python benchmarks/mpc_vs_sac.py [--seeds 0 1 2] [--points 5000 10000] [--eval-episodes 10]
"""
from __future__ import annotations

import argparse
import datetime
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from machine import machine_line

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's hpcrl scores, as it trains in the jobs
RECIPES = {"mpc": "mpc-pendulum.yaml", "sac": "sac-pendulum.yaml"}
EVAL_SEED = 424_242  # the eval episodes' seed, the same for every job (offpolicy_vs_sb3.py's)


def hpcrl_train(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """``hpcrl train ARGS`` (this checkout's) to completion; its wall seconds and its CPU
    seconds (user and system: what it costs whatever else the machine runs)."""
    start, used = time.perf_counter(), _children_cpu()
    done = subprocess.run([sys.executable, "-m", "hpcrl.cli", "train", *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"hpcrl train {' '.join(args[:3])} failed:\n{done.stderr[-2000:]}")
    return time.perf_counter() - start, _children_cpu() - used


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def score(run: Path, algo: str, episodes: int) -> list[float]:
    """Returns of ``episodes`` evaluation episodes of the run's policy, from the shared seed."""
    import hpcrl
    from hpcrl.config.loader import load_config
    from hpcrl.learning.evaluation import run_episodes

    config = load_config(ROOT / "examples" / RECIPES[algo])
    policy = hpcrl.load_policy(run).eval()
    return run_episodes(policy, config.env, episodes, EVAL_SEED,
                        config.train.eval_max_episode_steps).returns


def train_seconds(run: Path) -> float:
    """The training loop's seconds so far: the last ``wall_time_s`` of ``progress.csv``."""
    rows = (run / "progress.csv").read_text().splitlines()
    return float(rows[-1].split(",")[rows[0].split(",").index("wall_time_s")])


def job(algo: str, seed: int, points: list[int], episodes: int, env: dict[str, str]
        ) -> list[dict[str, Any]]:
    """``algo``'s recipe with ``seed``, scored at each point of ``points`` (ascending)."""
    results = []
    wall = cpu = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        for i, steps in enumerate(points):
            common = ["--set", f"train.total_env_steps={steps}", "--set",
                      "train.eval_episodes=0", "--set", "train.tensorboard=false"]
            if i == 0:
                args = [str(ROOT / "examples" / RECIPES[algo]), "--run-dir", str(run),
                        "--set", f"seed={seed}", *common]
            else:
                args = ["--resume", str(run), *common]
            seconds, used = hpcrl_train(args, env)
            wall, cpu = wall + seconds, cpu + used
            returns = score(run, algo, episodes)
            results.append({"steps": steps, "returns": returns, "train_s": train_seconds(run),
                            "wall_s": wall, "cpu_s": cpu})
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--points", type=int, nargs="+", default=[5000, 10000])
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--algos", nargs="+", choices=list(RECIPES), default=list(RECIPES))
    args = parser.parse_args()
    points = sorted(args.points)
    print(machine_line(), flush=True)
    print(f"date: {datetime.date.today().isoformat()}; recipes: "
          + ", ".join(f"{a} examples/{RECIPES[a]}" for a in args.algos)
          + f"; eval: {args.eval_episodes} episodes from seed {EVAL_SEED}", flush=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    print(f"{'algo':>4} {'seed':>4} {'steps':>6} {'return':>8} {'std':>6} {'train s':>8} "
          f"{'wall s':>8} {'cpu s':>8}", flush=True)
    table: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for seed in args.seeds:
        for algo in args.algos:
            for r in job(algo, seed, points, args.eval_episodes, env):
                table.setdefault((algo, r["steps"]), []).append(r)
                print(f"{algo:>4} {seed:>4} {r['steps']:>6} "
                      f"{statistics.fmean(r['returns']):8.1f} "
                      f"{statistics.pstdev(r['returns']):6.1f} {r['train_s']:8.1f} "
                      f"{r['wall_s']:8.1f} {r['cpu_s']:8.1f}", flush=True)
    print(f"over {len(args.seeds)} seed(s): mean return, mean train s (cpu s)", flush=True)
    for steps in points:
        parts = []
        for algo in args.algos:
            rows = table[(algo, steps)]
            mean = statistics.fmean(statistics.fmean(r["returns"]) for r in rows)
            seconds = statistics.fmean(r["train_s"] for r in rows)
            cpu = statistics.fmean(r["cpu_s"] for r in rows)
            parts.append(f"{algo} {mean:.1f} in {seconds:.0f} s ({cpu:.0f} s)")
        print(f"  {steps:>6} steps: " + "; ".join(parts), flush=True)


if __name__ == "__main__":
    main()
