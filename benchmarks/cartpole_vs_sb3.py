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
import statistics
import sys
import tempfile
from pathlib import Path

from machine import AVX2_ONLY, machine_line
from measure_process import measure

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
        done = measure([str(hpcrl), "train", "--run-dir", str(run), "--set", f"seed={seed}"],
                       env)
        result = json.loads((run / "eval.json").read_text())
        rows = (run / "progress.csv").read_text().splitlines()
        header = rows[0].split(",")
        train_s = float(rows[-1].split(",")[header.index("wall_time_s")])
    return {"wall_s": done.wall_s, "cpu_s": done.cpu_s, "rss_mb": done.rss_mb,
            "mean_return": result["mean_return"], "train_s": train_s}


def sb3_job(seed: int, env: dict[str, str]) -> dict[str, float]:
    done = measure([sys.executable, "-c", SB3_JOB, str(seed)], env)
    result = json.loads(done.out.strip().splitlines()[-1])
    return {"wall_s": done.wall_s, "cpu_s": done.cpu_s, "rss_mb": done.rss_mb, **result}


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
    print(f"{'seed':>4} {'dispatch':>8} {'job':>6} {'wall s':>8} {'cpu s':>8} {'train s':>8} "
          f"{'peak MB':>8} {'return':>8}")
    jobs: dict[tuple[str, str], list[dict[str, float]]] = {}
    for seed in args.seeds:
        for dispatch in args.dispatch:
            env = {**os.environ, "OMP_NUM_THREADS": "1", **DISPATCHES[dispatch]}
            for name, job in (("hpcrl", hpcrl_job), ("sb3", sb3_job)):
                r = job(seed, env)
                jobs.setdefault((dispatch, name), []).append(r)
                print(f"{seed:>4} {dispatch:>8} {name:>6} {r['wall_s']:8.1f} {r['cpu_s']:8.1f} "
                      f"{r['train_s']:8.1f} {r['rss_mb']:8.0f} {r['mean_return']:8.1f}",
                      flush=True)
    # other tenants of a shared host slow single jobs by up to 2x: the fastest job of each
    # kind is the least disturbed measure, the median says what a run usually takes
    for dispatch in args.dispatch:
        ours, theirs = jobs[(dispatch, "hpcrl")], jobs[(dispatch, "sb3")]
        for what in ("wall_s", "cpu_s"):
            a, b = [r[what] for r in ours], [r[what] for r in theirs]
            print(f"{dispatch}: hpcrl / sb3 {what[:-2]} over {len(a)} pairs: fastest "
                  f"{min(a):.1f} / {min(b):.1f} s = {min(a) / min(b):.3f}x, median "
                  f"{statistics.median(a):.1f} / {statistics.median(b):.1f} s = "
                  f"{statistics.median(a) / statistics.median(b):.3f}x (target <= 0.5)")
        print(f"{dispatch}: hpcrl peak / sb3 peak = "
              f"{max(r['rss_mb'] for r in ours) / max(r['rss_mb'] for r in theirs):.2f} "
              f"(target <= 1)")


if __name__ == "__main__":
    main()
