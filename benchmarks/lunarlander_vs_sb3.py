"""PPO on LunarLander-v3 with RL-zoo's recipe: hpcrl against Stable-Baselines3, side by side.

Both jobs run at the same time, one process each on its own core (one torch thread each),
so they see the same machine load. Each reports its wall time (whole process, imports
included), its training time, and the deterministic evaluation over 20 episodes after
training (hpcrl: its own final evaluation, ``eval.json``; SB3: ``evaluate_policy``).

    pip install -e '.[bench,box2d]'
    python benchmarks/lunarlander_vs_sb3.py [--steps 1000000] [--seed 0]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from machine import machine_line

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "examples" / "lunarlander-ppo.yaml"

SB3_JOB = r"""
import json, sys, time
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
torch.set_num_threads(1)
seed, steps = int(sys.argv[1]), int(sys.argv[2])
env = make_vec_env("LunarLander-v3", n_envs=16, seed=seed)
model = PPO("MlpPolicy", env, n_steps=1024, batch_size=64, n_epochs=4, gamma=0.999,
            gae_lambda=0.98, ent_coef=0.01, learning_rate=3e-4, clip_range=0.2,
            seed=seed, device="cpu", verbose=0)
t0 = time.perf_counter()
model.learn(steps)
train_s = time.perf_counter() - t0
returns, _ = evaluate_policy(model, make_vec_env("LunarLander-v3", n_envs=1, seed=seed + 1000),
                             n_eval_episodes=20, deterministic=True, return_episode_rewards=True)
print(json.dumps({"returns": [float(r) for r in returns], "train_s": train_s}))
"""


class Job(threading.Thread):
    """One process, timed from its start to its own exit (not to when it is collected)."""

    def __init__(self, cmd: list[str], env: dict[str, str]) -> None:
        super().__init__()
        self.cmd, self.env = cmd, env
        self.wall, self.out = 0.0, ""

    def run(self) -> None:
        started = time.perf_counter()
        done = subprocess.run(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              env=self.env, text=True)
        self.wall, self.out = time.perf_counter() - started, done.stdout
        if done.returncode != 0:
            self.out = f"FAILED with status {done.returncode}"


def finish(job: Job) -> tuple[float, str]:
    job.join()
    if job.out.startswith("FAILED"):
        raise SystemExit(f"{job.cmd[:4]} {job.out}")
    return job.wall, job.out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(machine_line(), flush=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        hpcrl = Path(sys.executable).with_name("hpcrl")
        ours = Job([str(hpcrl), "train", str(RECIPE), "--run-dir", str(run),
                      "--set", f"seed={args.seed}", "--set",
                      f"train.total_env_steps={args.steps}"], env)
        theirs = Job([sys.executable, "-c", SB3_JOB, str(args.seed), str(args.steps)], env)
        ours.start()
        theirs.start()
        sb3_wall, sb3_out = finish(theirs)
        our_wall, _ = finish(ours)
        our_eval = json.loads((run / "eval.json").read_text())
        rows = (run / "progress.csv").read_text().splitlines()
        our_train = float(rows[-1].split(",")[rows[0].split(",").index("wall_time_s")])
    sb3 = json.loads(sb3_out.strip().splitlines()[-1])
    sb3_returns = sb3["returns"]
    sb3_mean = sum(sb3_returns) / len(sb3_returns)
    sb3_std = (sum((r - sb3_mean) ** 2 for r in sb3_returns) / len(sb3_returns)) ** 0.5
    print(f"PPO on LunarLander-v3, RL-zoo recipe, {args.steps:,} env steps, seed {args.seed}, "
          f"both jobs at once (one core each)")
    print(f"{'':<8}{'wall s':>9}{'train s':>9}{'eval (20 ep.)':>22}")
    print(f"{'hpcrl':<8}{our_wall:>9.1f}{our_train:>9.1f}"
          f"{our_eval['mean_return']:>14.1f} +- {our_eval['std_return']:<5.1f}")
    print(f"{'SB3':<8}{sb3_wall:>9.1f}{sb3['train_s']:>9.1f}{sb3_mean:>14.1f} +- {sb3_std:<5.1f}")
    print(f"wall ratio hpcrl/SB3: {our_wall / sb3_wall:.2f}")


if __name__ == "__main__":
    main()
