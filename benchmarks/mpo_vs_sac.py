"""MPO's recipe against SAC's on Pendulum-v1, side by side: wall-clock per env step and return.

Both recipes (``examples/mpo-pendulum.yaml``, ``examples/sac-pendulum.yaml``) take one
gradient step per env step on batches of 256 with the same [256, 256] networks, so the
ratio of their seconds per env step is what MPO's own work costs beyond SAC's: the E-step's
sampled actions valued by the target critics, the temperature and multipliers' duals, a
target policy. Each job is ``hpcrl train`` in a fresh process, one at a time, on the same
budget of env steps; "train s" is its training loop (``progress.csv``'s ``wall_time_s``),
"wall s" the whole process (imports and training, its own final eval off), "cpu s" the CPU
seconds the process used: on a shared machine other jobs stretch the wall-clock of one job
more than another's, and its CPU seconds far less. The trained policies are then scored
by hpcrl's evaluator on the same deterministic episodes (one eval seed for every job, as in
``benchmarks/offpolicy_vs_sb3.py``).

``--source DIR`` trains with the hpcrl of another checkout (its ``examples/`` too): the
same seeds before and after a change to the code, scored by the same evaluator.

    python benchmarks/mpo_vs_sac.py [--steps 20000] [--seeds 0] [--algos mpo sac]
"""
from __future__ import annotations

import argparse
import csv
import os
import resource
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from machine import machine_line
from offpolicy_vs_sb3 import EVAL_SEED, run_timed

ROOT = Path(__file__).resolve().parents[1]
RECIPES = {"mpo": "mpo-pendulum.yaml", "sac": "sac-pendulum.yaml"}


def train(algo: str, seed: int, steps: int, source: Path, run: Path) -> dict[str, float]:
    """``hpcrl train`` on ``algo``'s recipe of ``source`` for ``steps`` env steps, in a
    process of its own; its wall, training-loop and CPU seconds."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(source)}
    recipe = source / "examples" / RECIPES[algo]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall, _ = run_timed([sys.executable, "-m", "hpcrl.cli", "train", str(recipe),
                         "--run-dir", str(run), "--set", f"seed={seed}",
                         "--set", f"train.total_env_steps={steps}",
                         "--set", "train.tensorboard=false",
                         "--set", "train.eval_episodes=0"], env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    with open(run / "progress.csv") as f:
        last = list(csv.DictReader(f))[-1]
    return {"wall_s": wall, "train_s": float(last["wall_time_s"]), "cpu_s": cpu,
            "env_steps": float(last["env_steps"])}


def score(run: Path, episodes: int) -> list[float]:
    """Returns of ``episodes`` deterministic episodes of the run's policy, from the shared
    eval seed."""
    import hpcrl
    from hpcrl.config.loader import load_config
    from hpcrl.learning.evaluation import run_episodes

    config = load_config(run / "config.yaml")
    return run_episodes(hpcrl.load_policy(run), config.env, episodes, EVAL_SEED,
                        config.train.eval_max_episode_steps).returns


def job(algo: str, seed: int, args: argparse.Namespace) -> dict[str, Any]:
    """One training job and its score."""
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        result: dict[str, Any] = train(algo, seed, args.steps, args.source, run)
        result["returns"] = score(run, args.eval_episodes)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algos", nargs="+", choices=list(RECIPES), default=list(RECIPES))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--steps", type=int, default=20_000, help="env steps of each job")
    parser.add_argument("--eval-episodes", type=int, default=50)
    parser.add_argument("--source", type=Path, default=ROOT,
                        help="the checkout whose hpcrl and recipes train (default: this one)")
    args = parser.parse_args()
    print(machine_line(), flush=True)
    print(f"source: {args.source}; {args.steps} env steps a job; eval: {args.eval_episodes} "
          f"deterministic episodes from seed {EVAL_SEED}", flush=True)
    print(f"{'algo':>4} {'seed':>4} {'wall s':>8} {'train s':>8} {'ms/step':>8} "
          f"{'cpu s':>8} {'cpu ms/step':>11} {'return':>8} {'std':>6}", flush=True)
    per_step: dict[str, list[float]] = {algo: [] for algo in args.algos}
    cpu_per_step: dict[str, list[float]] = {algo: [] for algo in args.algos}
    returns: dict[str, list[float]] = {algo: [] for algo in args.algos}
    for seed in args.seeds:  # seeds outermost: an interrupted run still has both recipes
        for algo in args.algos:
            r = job(algo, seed, args)
            ms = 1e3 * r["train_s"] / r["env_steps"]
            cpu_ms = 1e3 * r["cpu_s"] / r["env_steps"]
            per_step[algo].append(ms)
            cpu_per_step[algo].append(cpu_ms)
            returns[algo].append(statistics.fmean(r["returns"]))
            print(f"{algo:>4} {seed:>4} {r['wall_s']:8.1f} {r['train_s']:8.1f} {ms:8.2f} "
                  f"{r['cpu_s']:8.1f} {cpu_ms:11.2f} {returns[algo][-1]:8.1f} "
                  f"{statistics.pstdev(r['returns']):6.1f}", flush=True)
    for algo in args.algos:
        print(f"{algo}: {statistics.fmean(per_step[algo]):.2f} ms per env step "
              f"({statistics.fmean(cpu_per_step[algo]):.2f} of CPU), mean return "
              f"{statistics.fmean(returns[algo]):.1f} over seeds {args.seeds}", flush=True)
    if set(per_step) == {"mpo", "sac"}:
        ratios = [statistics.fmean(d["mpo"]) / statistics.fmean(d["sac"])
                  for d in (per_step, cpu_per_step)]
        print(f"mpo / sac per env step: {ratios[0]:.2f}x wall-clock, {ratios[1]:.2f}x CPU",
              flush=True)


if __name__ == "__main__":
    main()
