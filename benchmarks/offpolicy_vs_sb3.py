"""Wall-clock and return of hpcrl's off-policy agents against Stable-Baselines3 with the same
hyperparameters (RL-zoo's recipes, examples/*.yaml), side by side in one run.

- DQN on CartPole-v1, 50k env steps (target: mean deterministic return >= 475);
- SAC on Pendulum-v1, 20k env steps (target: mean return >= -200);
- TD3 on Pendulum-v1, 20k env steps (target: mean return >= -200).

Every job runs in its own process, one at a time, measured whole (imports and the final
10-episode deterministic evaluation included); "train s" is the training loop alone.

    pip install stable-baselines3   # or: pip install -e '.[bench]'
    python benchmarks/offpolicy_vs_sb3.py [--algos dqn sac td3] [--seeds 0 1]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECIPES = {"dqn": ("dqn-cartpole.yaml", "CartPole-v1", 475.0),
           "sac": ("sac-pendulum.yaml", "Pendulum-v1", -200.0),
           "td3": ("td3-pendulum.yaml", "Pendulum-v1", -200.0)}

SB3_JOB = r"""
import json, sys, time
import numpy as np, torch
from stable_baselines3 import DQN, SAC, TD3
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.noise import NormalActionNoise
torch.set_num_threads(1)
algo, seed = sys.argv[1], int(sys.argv[2])
if algo == "dqn":
    env = make_vec_env("CartPole-v1", n_envs=1, seed=seed)
    model = DQN("MlpPolicy", env, learning_rate=lambda progress: 2.3e-3 * progress,
                n_steps=3, batch_size=64, buffer_size=100_000,
                learning_starts=1000, gamma=0.99, target_update_interval=10, train_freq=256,
                gradient_steps=128, exploration_fraction=0.16, exploration_final_eps=0.04,
                policy_kwargs=dict(net_arch=[256, 256]), seed=seed, device="cpu")
    steps, env_id = 50_000, "CartPole-v1"
elif algo == "sac":
    env = make_vec_env("Pendulum-v1", n_envs=1, seed=seed)
    model = SAC("MlpPolicy", env, learning_rate=1e-3, seed=seed, device="cpu")
    steps, env_id = 20_000, "Pendulum-v1"
else:
    env = make_vec_env("Pendulum-v1", n_envs=1, seed=seed)
    model = TD3("MlpPolicy", env, learning_rate=1e-3, gamma=0.98, buffer_size=200_000,
                learning_starts=10_000, gradient_steps=-1, train_freq=(1, "episode"),
                action_noise=NormalActionNoise(np.zeros(1), 0.1 * np.ones(1)),
                policy_kwargs=dict(net_arch=[400, 300]), seed=seed, device="cpu")
    steps, env_id = 20_000, "Pendulum-v1"
t0 = time.perf_counter()
model.learn(steps)
train_s = time.perf_counter() - t0
mean, _ = evaluate_policy(model, make_vec_env(env_id, n_envs=1, seed=seed + 1000),
                          n_eval_episodes=10, deterministic=True)
print(json.dumps({"mean_return": float(mean), "train_s": train_s}))
"""


def run_timed(cmd: list[str], env: dict[str, str]) -> tuple[float, str]:
    """Run ``cmd`` to completion; return its wall seconds and stdout."""
    start = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                          text=True, check=False)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:4])} failed:\n{proc.stderr[-2000:]}")
    return wall, proc.stdout


def hpcrl_job(algo: str, seed: int, env: dict[str, str]) -> dict[str, float]:
    recipe = ROOT / "examples" / RECIPES[algo][0]
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        hpcrl = Path(sys.executable).with_name("hpcrl")
        wall, _ = run_timed([str(hpcrl), "train", str(recipe), "--run-dir", str(run),
                             "--set", f"seed={seed}", "--set", "train.tensorboard=false",
                             "--set", "train.eval_episodes=10"], env)
        result = json.loads((run / "eval.json").read_text())
        rows = (run / "progress.csv").read_text().splitlines()
        header = rows[0].split(",")
        train_s = float(rows[-1].split(",")[header.index("wall_time_s")])
    return {"wall_s": wall, "train_s": train_s, "mean_return": result["mean_return"]}


def sb3_job(algo: str, seed: int, env: dict[str, str]) -> dict[str, float]:
    wall, out = run_timed([sys.executable, "-c", SB3_JOB, algo, str(seed)], env)
    return {"wall_s": wall, **json.loads(out.strip().splitlines()[-1])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algos", nargs="+", choices=list(RECIPES), default=list(RECIPES))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    args = parser.parse_args()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    print(f"{'algo':>4} {'seed':>4} {'job':>6} {'wall s':>8} {'train s':>8} {'return':>8}",
          flush=True)
    summary = []
    for algo in args.algos:
        for seed in args.seeds:
            ours, theirs = hpcrl_job(algo, seed, env), sb3_job(algo, seed, env)
            for name, r in (("hpcrl", ours), ("sb3", theirs)):
                print(f"{algo:>4} {seed:>4} {name:>6} {r['wall_s']:8.1f} {r['train_s']:8.1f} "
                      f"{r['mean_return']:8.1f}", flush=True)
            summary.append((algo, seed, ours, theirs))
    for algo, seed, ours, theirs in summary:
        target = RECIPES[algo][2]
        wall, train = theirs["wall_s"] / ours["wall_s"], theirs["train_s"] / ours["train_s"]
        print(f"{algo} seed {seed}: sb3 wall / hpcrl wall = {wall:.2f}x (train {train:.2f}x; "
              f"target >= 1); hpcrl return {ours['mean_return']:.1f} "
              f"({'meets' if ours['mean_return'] >= target else 'misses'} >= {target:g}), "
              f"sb3 {theirs['mean_return']:.1f}")


if __name__ == "__main__":
    main()
