"""Hindsight replay: hpcrl's HER-SAC against Stable-Baselines3's SAC + HerReplayBuffer, and
both against plain SAC, on the same sparse goal task, budget and hyperparameters.

The task is ``hpcrl.tasks:PointReach-v0`` (reach a random goal within 0.05 in 50 steps, reward -1
at every step away from it), the recipe ``examples/her-sac.yaml``: 10k env steps, SAC with
net [256, 256], batch 256, lr 1e-3, gamma 0.95, learning_starts 1000, one gradient step per
env step, automatic temperature; HER with 4 relabelled goals per transition, 'future'.
Plain SAC is the same recipe without relabelling (``replay.her_strategy=none``, SB3's
default replay buffer).

Every trained policy is scored by hpcrl's evaluator (:func:`hpcrl.learning.evaluation.run_episodes`)
on the same ``--eval-episodes`` deterministic episodes (one eval seed for every job): the
success rate is the share of episodes whose last step reports ``info["is_success"]``.
Every training job runs in its own process, one at a time; "wall s" is the whole process
(imports and training, not the evaluation).

    pip install -e '.[bench]'
    python benchmarks/her_vs_sb3.py [--seeds 0 1 2] [--eval-episodes 100]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from machine import machine_line
from offpolicy_vs_sb3 import run_timed

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "examples" / "her-sac.yaml"
EVAL_SEED = 424_242  # the eval episodes' seed, the same for every job
JOBS = ("hpcrl-her", "sb3-her", "hpcrl-plain", "sb3-plain")


def success_rate(act: Callable[[Any], Any], episodes: int) -> float:
    """Success rate of ``episodes`` deterministic episodes of the recipe's env, scored by
    hpcrl's evaluator; ``act`` maps a batch of carried observations to actions."""
    from hpcrl.config.loader import load_config
    from hpcrl.learning.evaluation import run_episodes

    config = load_config(RECIPE)
    played = run_episodes(act, config.env, episodes, EVAL_SEED,
                          config.train.eval_max_episode_steps)
    return statistics.fmean(played.successes)


def sb3_job(her: bool, seed: int, episodes: int) -> None:
    """Train SB3's SAC on the recipe's values in this process; print its figures as JSON."""
    import numpy as np
    import torch
    from stable_baselines3 import SAC, HerReplayBuffer
    from stable_baselines3.common.env_util import make_vec_env

    from hpcrl.envs.obs_format import obs_format
    from hpcrl.tasks.point_reach import ENV_ID

    torch.set_num_threads(1)
    env = make_vec_env(ENV_ID, n_envs=1, seed=seed)
    extra: dict[str, Any] = {}
    if her:
        extra = dict(replay_buffer_class=HerReplayBuffer,
                     replay_buffer_kwargs=dict(n_sampled_goal=4,
                                               goal_selection_strategy="future"))
    model = SAC("MultiInputPolicy", env, learning_rate=1e-3, buffer_size=1_000_000,
                learning_starts=1000, batch_size=256, tau=0.005, gamma=0.95, train_freq=1,
                gradient_steps=1, policy_kwargs=dict(net_arch=[256, 256]), seed=seed,
                device="cpu", **extra)
    t0 = time.perf_counter()
    model.learn(10_000)
    train_s = time.perf_counter() - t0
    fmt = obs_format(env.observation_space)

    def act(batch: Any) -> torch.Tensor:
        keys = fmt.unpack_numpy(np.asarray(batch))
        return torch.as_tensor(model.predict(keys, deterministic=True)[0])

    t1 = time.perf_counter()
    rate = success_rate(act, episodes)
    print(json.dumps({"train_s": train_s, "eval_s": time.perf_counter() - t1,
                      "success": rate}))


def run_hpcrl(her: bool, seed: int, episodes: int, env: dict[str, str]) -> dict[str, Any]:
    """``hpcrl train`` on the recipe (its own final eval off), then the shared evaluator."""
    import hpcrl

    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        cli = Path(sys.executable).with_name("hpcrl")
        sets = [f"seed={seed}", "train.tensorboard=false", "train.eval_episodes=0",
                f"replay.her_strategy={'future' if her else 'none'}"]
        wall, _ = run_timed([str(cli), "train", str(RECIPE), "--run-dir", str(run),
                             *[arg for s in sets for arg in ("--set", s)]], env)
        rows = (run / "progress.csv").read_text().splitlines()
        train_s = float(rows[-1].split(",")[rows[0].split(",").index("wall_time_s")])
        policy = hpcrl.load_policy(run)
    return {"wall_s": wall, "train_s": train_s, "success": success_rate(policy, episodes)}


def run_sb3(her: bool, seed: int, episodes: int, env: dict[str, str]) -> dict[str, Any]:
    """:func:`sb3_job` in a fresh process; its wall time less the evaluation."""
    wall, out = run_timed([sys.executable, __file__, "--job", "sb3-her" if her else "sb3-plain",
                           "--seeds", str(seed), "--eval-episodes", str(episodes)], env)
    result = json.loads(out.strip().splitlines()[-1])
    return {"wall_s": wall - result["eval_s"], "train_s": result["train_s"],
            "success": result["success"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--eval-episodes", type=int, default=100,
                        help="deterministic episodes per trained policy (same for all)")
    parser.add_argument("--jobs", nargs="+", choices=JOBS, default=list(JOBS))
    parser.add_argument("--job", choices=["sb3-her", "sb3-plain"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    print(machine_line(), flush=True)
    if args.job:
        sb3_job(args.job == "sb3-her", args.seeds[0], args.eval_episodes)
        return
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    print(f"task hpcrl.tasks:PointReach-v0, 10k env steps (examples/her-sac.yaml); eval: "
          f"{args.eval_episodes} deterministic episodes of hpcrl's evaluator, seed "
          f"{EVAL_SEED}", flush=True)
    print(f"{'job':>12} {'seed':>4} {'wall s':>8} {'train s':>8} {'success':>8}", flush=True)
    results: dict[str, list[dict[str, Any]]] = {job: [] for job in args.jobs}
    for seed in args.seeds:
        for job in args.jobs:
            runner = run_hpcrl if job.startswith("hpcrl") else run_sb3
            r = runner(job.endswith("her"), seed, args.eval_episodes, env)
            results[job].append(r)
            print(f"{job:>12} {seed:>4} {r['wall_s']:8.1f} {r['train_s']:8.1f} "
                  f"{r['success']:8.2f}", flush=True)
    for job, rs in results.items():
        rates = [r["success"] for r in rs]
        spread = statistics.stdev(rates) if len(rates) > 1 else 0.0
        print(f"{job}: success {statistics.fmean(rates):.2f} +- {spread:.2f} over "
              f"{len(rates)} seeds, mean wall {statistics.fmean(r['wall_s'] for r in rs):.0f} s",
              flush=True)


if __name__ == "__main__":
    main()
