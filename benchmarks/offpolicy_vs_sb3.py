"""Return and wall-clock of hpcrl's off-policy agents against Stable-Baselines3 with the same
hyperparameters (RL-zoo's recipes, examples/*.yaml), over several seeds, side by side.

- DQN on CartPole-v1, 50k env steps (target: mean deterministic return >= 475);
- SAC on Pendulum-v1, 20k env steps (target: mean return >= -200);
- TD3 on Pendulum-v1, 20k env steps (target: mean return >= -200).

Both libraries' trained policies are scored by hpcrl's evaluator (``hpcrl eval``):
deterministic actions, clipped to the action space, on the same ``--eval-episodes`` episodes,
whose start states come from one eval seed shared by every library and training seed.
Pendulum's return depends mostly on where the pendulum starts (hanging down costs about -300
to swing up, upright about 0), so libraries scored on different start states cannot be
compared: 10 episodes from different reset seeds differ by 50 or more on the same policy.

Every training job runs in its own process, one at a time, measured whole ("wall s": imports
and training, not the evaluation); "train s" is the training loop alone.

    pip install stable-baselines3   # or: pip install -e '.[bench]'
    python benchmarks/offpolicy_vs_sb3.py [--algos dqn sac td3] [--seeds 0 1 2 3 4]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from machine import machine_line

ROOT = Path(__file__).resolve().parents[1]
RECIPES = {"dqn": ("dqn-cartpole.yaml", "CartPole-v1", 475.0),
           "sac": ("sac-pendulum.yaml", "Pendulum-v1", -200.0),
           "td3": ("td3-pendulum.yaml", "Pendulum-v1", -200.0)}
EVAL_SEED = 424_242  # the eval episodes' seed, the same for every job
LIBS = ("hpcrl", "sb3")


def evaluate(act: Callable[[Any], Any], algo: str, episodes: int) -> list[float]:
    """Returns of ``episodes`` deterministic episodes of ``algo``'s env, scored by hpcrl's own
    evaluator (:func:`hpcrl.learning.evaluation.run_episodes`: actions clipped to the action space)
    from the same reset seeds for every job; ``act`` maps an observation to an action
    tensor."""
    from hpcrl.config.loader import load_config
    from hpcrl.learning.evaluation import run_episodes

    config = load_config(ROOT / "examples" / RECIPES[algo][0])
    return run_episodes(act, config.env, episodes, EVAL_SEED,
                        config.train.eval_max_episode_steps).returns


def sb3_model(algo: str, seed: int) -> tuple[Any, int]:
    """The SB3 model of ``algo``'s recipe (the same values as examples/*.yaml) and its
    env-step budget."""
    import numpy as np
    from stable_baselines3 import DQN, SAC, TD3
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.noise import NormalActionNoise

    if algo == "dqn":
        env = make_vec_env("CartPole-v1", n_envs=1, seed=seed)
        return DQN("MlpPolicy", env, learning_rate=lambda progress: 2.3e-3 * progress,
                   batch_size=64, buffer_size=100_000, learning_starts=1000, gamma=0.99,
                   target_update_interval=10, train_freq=256, gradient_steps=128,
                   exploration_fraction=0.16, exploration_final_eps=0.04,
                   policy_kwargs=dict(net_arch=[256, 256]), seed=seed, device="cpu"), 50_000
    env = make_vec_env("Pendulum-v1", n_envs=1, seed=seed)
    if algo == "sac":
        return SAC("MlpPolicy", env, learning_rate=1e-3, seed=seed, device="cpu"), 20_000
    return TD3("MlpPolicy", env, learning_rate=1e-3, gamma=0.98, buffer_size=200_000,
               learning_starts=10_000, gradient_steps=-1, train_freq=(1, "episode"),
               action_noise=NormalActionNoise(np.zeros(1), 0.1 * np.ones(1)),
               policy_kwargs=dict(net_arch=[400, 300]), seed=seed, device="cpu"), 20_000


def sb3_job(algo: str, seed: int, episodes: int) -> None:
    """Train SB3 on ``algo``'s recipe in this process and print its figures as JSON."""
    import numpy as np
    import torch

    torch.set_num_threads(1)
    model, steps = sb3_model(algo, seed)
    t0 = time.perf_counter()
    model.learn(steps)
    train_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    returns = evaluate(lambda obs: torch.as_tensor(model.predict(np.asarray(obs),
                                                                 deterministic=True)[0]),
                       algo, episodes)
    print(json.dumps({"train_s": train_s, "eval_s": time.perf_counter() - t1,
                      "returns": returns}))


def run_timed(cmd: list[str], env: dict[str, str]) -> tuple[float, str]:
    """Run ``cmd`` to completion; return its wall seconds and stdout."""
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, env=env,
                          text=True, check=False)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:4])} failed:\n{proc.stderr[-2000:]}")
    return wall, proc.stdout


def run_hpcrl(algo: str, seed: int, episodes: int, env: dict[str, str]) -> dict[str, Any]:
    """``hpcrl train`` on the recipe (its own final eval off), then the shared evaluator."""
    import hpcrl

    recipe = ROOT / "examples" / RECIPES[algo][0]
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        cli = Path(sys.executable).with_name("hpcrl")
        wall, _ = run_timed([str(cli), "train", str(recipe), "--run-dir", str(run),
                             "--set", f"seed={seed}", "--set", "train.tensorboard=false",
                             "--set", "train.eval_episodes=0"], env)
        rows = (run / "progress.csv").read_text().splitlines()
        train_s = float(rows[-1].split(",")[rows[0].split(",").index("wall_time_s")])
        policy = hpcrl.load_policy(run)
    returns = evaluate(policy, algo, episodes)
    return {"wall_s": wall, "train_s": train_s, "returns": returns}


def run_sb3(algo: str, seed: int, episodes: int, env: dict[str, str]) -> dict[str, Any]:
    """:func:`sb3_job` in a fresh process; its wall time less the evaluation."""
    wall, out = run_timed([sys.executable, __file__, "--job", "sb3", "--algos", algo,
                           "--seeds", str(seed), "--eval-episodes", str(episodes)], env)
    result = json.loads(out.strip().splitlines()[-1])
    return {"wall_s": wall - result["eval_s"], "train_s": result["train_s"],
            "returns": result["returns"]}


def mean_std(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def summarise(algo: str, results: dict[str, list[dict[str, Any]]]) -> None:
    """Mean +- std over seeds of each library, the difference against its standard error,
    and the wall-clock ratio."""
    means = {lib: [statistics.fmean(r["returns"]) for r in results[lib]] for lib in LIBS}
    n = min(len(means[lib]) for lib in LIBS)
    if n == 0:
        return
    stats = {lib: mean_std(means[lib][:n]) for lib in LIBS}
    walls = {lib: statistics.fmean(r["wall_s"] for r in results[lib][:n]) for lib in LIBS}
    diff = stats["hpcrl"][0] - stats["sb3"][0]
    se = math.sqrt(sum(stats[lib][1] ** 2 / n for lib in LIBS))
    verdict = "within" if abs(diff) <= 2 * se else "outside"
    target = RECIPES[algo][2]
    print(f"{algo} over {n} seeds: hpcrl {stats['hpcrl'][0]:.1f} +- {stats['hpcrl'][1]:.1f}, "
          f"sb3 {stats['sb3'][0]:.1f} +- {stats['sb3'][1]:.1f} (difference {diff:+.1f}, "
          f"2 standard errors {2 * se:.1f}: {verdict} seed noise; target >= {target:g}); "
          f"mean wall hpcrl {walls['hpcrl']:.0f} s, sb3 {walls['sb3']:.0f} s, "
          f"sb3 / hpcrl = {walls['sb3'] / walls['hpcrl']:.2f}x", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algos", nargs="+", choices=list(RECIPES), default=list(RECIPES))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--eval-episodes", type=int, default=50,
                        help="deterministic episodes per trained policy (same for both)")
    parser.add_argument("--job", choices=["sb3"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    print(machine_line(), flush=True)
    if args.job:
        sb3_job(args.algos[0], args.seeds[0], args.eval_episodes)
        return
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    print(f"eval: {args.eval_episodes} deterministic episodes of hpcrl's evaluator, seed "
          f"{EVAL_SEED} (the same episodes for every job)", flush=True)
    print(f"{'algo':>4} {'seed':>4} {'job':>6} {'wall s':>8} {'train s':>8} {'return':>8} "
          f"{'std':>6}", flush=True)
    results = {algo: {lib: [] for lib in LIBS} for algo in args.algos}
    for seed in args.seeds:  # seeds outermost: an interrupted run still has every algo
        for algo in args.algos:
            for lib, job in (("hpcrl", run_hpcrl), ("sb3", run_sb3)):
                r = job(algo, seed, args.eval_episodes, env)
                results[algo][lib].append(r)
                print(f"{algo:>4} {seed:>4} {lib:>6} {r['wall_s']:8.1f} {r['train_s']:8.1f} "
                      f"{statistics.fmean(r['returns']):8.1f} "
                      f"{statistics.pstdev(r['returns']):6.1f}", flush=True)
    for algo in args.algos:
        summarise(algo, results[algo])


if __name__ == "__main__":
    main()
