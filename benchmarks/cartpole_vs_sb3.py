"""Wall-clock and peak memory of `hpcrl train` (embedded default) against Stable-Baselines3
PPO with the same hyperparameters (RL-zoo's CartPole-v1 recipe), side by side.

Each job runs in its own process, measured whole (imports included): wall-clock, peak RSS
(from wait4), and the mean deterministic return over 10 episodes after training.

    pip install stable-baselines3   # or: pip install -e '.[bench]'
    python benchmarks/cartpole_vs_sb3.py [--seeds 0 1 2] [--dispatch native avx2]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from machine import AVX2_ONLY, machine_line
from measure_process import run_measured

SB3_JOB = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np, torch
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
torch.set_num_threads(1)
seed = int(sys.argv[1])
lin = lambda v: (lambda progress_remaining: progress_remaining * v)
env = make_vec_env("CartPole-v1", n_envs=8, seed=seed)
model = PPO("MlpPolicy", env, n_steps=32, batch_size=256, n_epochs=20, gamma=0.98,
            gae_lambda=0.8, learning_rate=lin(1e-3), clip_range=lin(0.2), ent_coef=0.0,
            seed=seed, device="cpu", verbose=0)
t1 = time.perf_counter()
model.learn(100_000)
t2 = time.perf_counter()
mean, std = evaluate_policy(model, make_vec_env("CartPole-v1", n_envs=1, seed=seed + 1000),
                            n_eval_episodes=10, deterministic=True)
print(json.dumps({"mean_return": float(mean), "train_s": t2 - t1}))
"""


def hpcrl_job(seed: int, env: dict[str, str]) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        hpcrl = Path(sys.executable).with_name("hpcrl")
        wall, rss, _ = run_measured([str(hpcrl), "train", "--run-dir", str(run),
                                     "--set", f"seed={seed}"], env)
        result = json.loads((run / "eval.json").read_text())
        rows = (run / "progress.csv").read_text().splitlines()
        header = rows[0].split(",")
        train_s = float(rows[-1].split(",")[header.index("wall_time_s")])
    return {"wall_s": wall, "rss_mb": rss, "mean_return": result["mean_return"],
            "train_s": train_s}


def sb3_job(seed: int, env: dict[str, str]) -> dict[str, float]:
    wall, rss, out = run_measured([sys.executable, "-c", SB3_JOB, str(seed)], env)
    result = json.loads(out.strip().splitlines()[-1])
    return {"wall_s": wall, "rss_mb": rss, **result}


DISPATCHES = {"native": {}, "avx2": AVX2_ONLY}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--dispatch", nargs="+", choices=sorted(DISPATCHES),
                        default=["native"],
                        help="'native': the libraries' kernels for this CPU; 'avx2': torch, "
                             "numpy, OpenBLAS, oneDNN and MKL held to their AVX2 kernels "
                             "(machine.AVX2_ONLY), as on a CPU without AVX-512; both: each "
                             "pair of jobs under each, interleaved in one run")
    args = parser.parse_args()
    print(machine_line(), flush=True)
    print("CartPole-v1, 100k env steps, 8 envs, n_steps 32, batch 256, 20 epochs, "
          "gamma 0.98, lambda 0.8, lr/clip linear from 1e-3/0.2")
    print(f"{'seed':>4} {'dispatch':>8} {'job':>6} {'wall s':>8} {'train s':>8} "
          f"{'peak MB':>8} {'return':>8}")
    ratios = []
    for seed in args.seeds:
        for dispatch in args.dispatch:
            env = {**os.environ, "OMP_NUM_THREADS": "1", **DISPATCHES[dispatch]}
            ours, theirs = hpcrl_job(seed, env), sb3_job(seed, env)
            for name, r in (("hpcrl", ours), ("sb3", theirs)):
                print(f"{seed:>4} {dispatch:>8} {name:>6} {r['wall_s']:8.1f} "
                      f"{r['train_s']:8.1f} {r['rss_mb']:8.0f} {r['mean_return']:8.1f}",
                      flush=True)
            ratios.append((seed, dispatch, ours["wall_s"] / theirs["wall_s"],
                           ours["rss_mb"] / theirs["rss_mb"]))
    for seed, dispatch, speed, mem in ratios:
        print(f"seed {seed} {dispatch}: hpcrl wall / sb3 wall = {speed:.3f}x (target <= 0.5); "
              f"hpcrl peak / sb3 peak = {mem:.2f} (target <= 1)")
    for dispatch in args.dispatch:
        mine = [speed for _, d, speed, _ in ratios if d == dispatch]
        print(f"{dispatch}: hpcrl wall / sb3 wall over {len(mine)} seeds: "
              f"{sum(mine) / len(mine):.3f}x")


if __name__ == "__main__":
    main()
