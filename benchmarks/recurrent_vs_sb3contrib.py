"""Recurrent PPO on a memory task: hpcrl (`actor.memory=lstm`) against sb3-contrib's
RecurrentPPO with the same hyperparameters, side by side; and what recurrence costs hpcrl per
update against the same agent without memory.

The task is the tests' CueMemory-v0: a cue shown only at an episode's first step must be
named at its last (2 to 6 blank steps later); +1 for the right answer, -1 for the wrong
one, so chance is 0 and perfect recall 1. Both agents: 8 envs, 32-step rollouts, 2
minibatches of 128 steps, 4 epochs, lr 3e-4 constant, gamma 0.99, GAE 0.95, clip 0.2,
ent_coef 0; an LSTM of 64 units for the policy and another for the value (sb3-contrib's
default layout: enable_critic_lstm) after the observation and before MLP [64, 64] tanh
trunks. hpcrl cuts each 32-step rollout into 16-step sequences (one per env in each
minibatch); sb3-contrib splits its minibatches at episode starts and pads.

Each job runs in its own process, measured whole (imports included): wall-clock, peak RSS,
and the mean deterministic return over 100 games after training.

    pip install sb3-contrib   # or: pip install -e '.[bench]'
    python benchmarks/recurrent_vs_sb3contrib.py [--seeds 0 1 2] [--steps 30000]
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import tempfile
from pathlib import Path

from machine import machine_line
from measure_process import run_measured

TESTENVS = Path(__file__).resolve().parents[1] / "tests" / "placement" / "mpi"

SB3_JOB = r"""
import json, sys, time
import numpy as np, torch
from sb3_contrib import RecurrentPPO
from stable_baselines3.common.env_util import make_vec_env
import hpcrl_testenvs  # registers CueMemory-v0
torch.set_num_threads(1)
seed, steps = int(sys.argv[1]), int(sys.argv[2])
env = make_vec_env("CueMemory-v0", n_envs=8, seed=seed)
model = RecurrentPPO("MlpLstmPolicy", env, n_steps=32, batch_size=128, n_epochs=4,
                     learning_rate=3e-4, gamma=0.99, gae_lambda=0.95, clip_range=0.2,
                     ent_coef=0.0, seed=seed, device="cpu", verbose=0,
                     policy_kwargs=dict(lstm_hidden_size=64, net_arch=[64, 64],
                                        activation_fn=torch.nn.Tanh))
t0 = time.perf_counter()
model.learn(steps)
train_s = time.perf_counter() - t0
test = make_vec_env("CueMemory-v0", n_envs=1, seed=seed + 1000)
total = 0.0
for _ in range(100):
    obs, state, start, done = test.reset(), None, np.ones((1,), bool), False
    while not done:
        action, state = model.predict(obs, state=state, episode_start=start,
                                      deterministic=True)
        obs, reward, dones, _ = test.step(action)
        total, done, start = total + float(reward[0]), bool(dones[0]), dones
print(json.dumps({"mean_return": total / 100, "train_s": train_s}))
"""

HYPERPARAMETERS = ["env.id=hpcrl_testenvs:CueMemory-v0", "env.num_envs=8", "algo.num_steps=32",
                   "algo.ppo.minibatch_size=128", "algo.ppo.num_epochs=4", "algo.lr=3e-4",
                   "algo.lr_schedule=constant", "algo.ppo.clip_schedule=constant",
                   "algo.gamma=0.99", "algo.gae_lambda=0.95", "algo.ent_coef=0.0",
                   "actor.hidden_sizes=[64,64]", "actor.activation=tanh",
                   "train.eval_episodes=100", "train.tensorboard=false"]
LSTM = ["actor.memory=lstm", "actor.memory_size=64"]


def hpcrl_job(seed: int, steps: int, memory: list[str], env: dict[str, str]
              ) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        hpcrl = Path(sys.executable).with_name("hpcrl")
        sets = HYPERPARAMETERS + memory + [f"seed={seed}", f"train.total_env_steps={steps}"]
        cmd = [str(hpcrl), "train", "--run-dir", str(run)]
        for item in sets:
            cmd += ["--set", item]
        wall, rss, _ = run_measured(cmd, env)
        result = json.loads((run / "eval.json").read_text())
        with open(run / "progress.csv") as f:
            rows = list(csv.DictReader(f))
    compute = sum(float(r["time_compute_s"]) for r in rows) / len(rows)
    return {"wall_s": wall, "rss_mb": rss, "mean_return": result["mean_return"],
            "train_s": float(rows[-1]["wall_time_s"]), "update_ms": 1000 * compute}


def sb3_job(seed: int, steps: int, env: dict[str, str]) -> dict[str, float]:
    wall, rss, out = run_measured([sys.executable, "-c", SB3_JOB, str(seed), str(steps)], env)
    return {"wall_s": wall, "rss_mb": rss, "update_ms": float("nan"),
            **json.loads(out.strip().splitlines()[-1])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--steps", type=int, default=30_000)
    args = parser.parse_args()
    print(machine_line(), flush=True)
    path = os.pathsep.join([str(TESTENVS), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": path}
    print(f"CueMemory-v0, {args.steps} env steps, 8 envs x 32 steps, 2 minibatches, 4 epochs, "
          f"LSTM 64 (policy and value) + MLP [64, 64]")
    print(f"{'seed':>4} {'job':>12} {'wall s':>8} {'train s':>8} {'peak MB':>8} "
          f"{'return':>7} {'ms/update':>10}")
    pairs, costs = [], []
    for seed in args.seeds:
        ours = hpcrl_job(seed, args.steps, LSTM, env)
        theirs = sb3_job(seed, args.steps, env)
        mlp = hpcrl_job(seed, args.steps, [], env)
        for name, r in (("hpcrl lstm", ours), ("sb3-contrib", theirs), ("hpcrl mlp", mlp)):
            print(f"{seed:>4} {name:>12} {r['wall_s']:8.1f} {r['train_s']:8.1f} "
                  f"{r['rss_mb']:8.0f} {r['mean_return']:7.2f} {r['update_ms']:10.1f}")
        pairs.append(ours["wall_s"] / theirs["wall_s"])
        costs.append(ours["update_ms"] / mlp["update_ms"])
    for seed, ratio, cost in zip(args.seeds, pairs, costs, strict=False):
        print(f"seed {seed}: hpcrl wall / sb3-contrib wall = {ratio:.2f}x; "
              f"learner time per update, LSTM / no memory = {cost:.1f}x")


if __name__ == "__main__":
    main()
