"""The Atari PPO recipe with its learner on a GPU and CPU collector ranks: env steps per
second, and the Pong score reached in a fixed wall-clock budget.

Prepared for a machine with one GPU and a handful of cores (the project's lent device: one
H200, 16 cores, minutes per session). It runs, as a user would,

    mpiexec -n 1+C hpcrl train examples/atari-ppo.yaml --set scheme.preset=a2c \\
        --set scheme.collectors_per_worker=C --set train.device=cuda ...

(one learner rank on the GPU, C synchronous collector ranks of 8 envs each acting on the
CPU), sends the job SIGUSR1 when the budget is spent (hpcrl checkpoints at the end of the
update and stops), evaluates the checkpoint with ``hpcrl eval`` and prints one table.

    pip install -e '.[atari]'
    python benchmarks/gpu_pong.py [--minutes 8] [--collectors 14] [--dtype bfloat16]
    python benchmarks/gpu_pong.py --device cpu --minutes 1 --collectors 2   # a dry run

Exit status 1 if the job failed or made no progress.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from machine import machine_line
from mpi_scaling import mpiexec, progress_rows, steps_per_second

from hpcrl.runtime.signals import EXIT_PREEMPTED

ROOT = Path(__file__).resolve().parents[1]


def train_command(args: argparse.Namespace, run_dir: Path) -> list[str]:
    """``mpiexec -n 1+C hpcrl train`` of the recipe with the budget's settings."""
    sets = [f"env.id={args.env}", f"train.device={args.device}",
            "scheme.preset=a2c", f"scheme.collectors_per_worker={args.collectors}",
            f"actor.compute_dtype={args.dtype}", f"train.total_env_steps={args.steps}",
            "train.eval_episodes=0", "train.tensorboard=false", "train.log_interval_s=30"]
    hpcrl = str(Path(sys.executable).with_name("hpcrl"))
    cmd = [mpiexec(), "-n", str(1 + args.collectors), hpcrl, "train",
           str(ROOT / "examples" / "atari-ppo.yaml"), "--run-dir", str(run_dir)]
    return cmd + [arg for key in sets for arg in ("--set", key)]


def train_for(cmd: list[str], seconds: float) -> tuple[int, float, str]:
    """Run ``cmd``; SIGUSR1 after ``seconds``; its exit code, wall seconds, stderr's tail."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    start = time.monotonic()
    job = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           env=env)
    try:
        _, err = job.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        job.send_signal(signal.SIGUSR1)  # mpiexec forwards it to every rank
        _, err = job.communicate(timeout=300)
    return job.returncode, time.monotonic() - start, err[-1500:]


def progress(run_dir: Path) -> dict[str, float]:
    """Env steps, env steps per second after the first update, and the mean training return
    of the last ten rows that have finished episodes."""
    rows = progress_rows(run_dir)
    returns = [float(r["episode_return_mean"]) for r in rows
               if r.get("episode_return_mean", "") not in ("", "nan")][-10:]
    return {"env_steps": float(rows[-1]["env_steps"]), "fps": steps_per_second(rows),
            "train_return": sum(returns) / len(returns) if returns else float("nan")}


def evaluate(run_dir: Path, episodes: int, device: str) -> dict[str, float]:
    """``hpcrl eval --json`` of the run's last checkpoint."""
    hpcrl = str(Path(sys.executable).with_name("hpcrl"))
    done = subprocess.run([hpcrl, "eval", str(run_dir), "-n", str(episodes), "--json",
                           "--device", device], capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"hpcrl eval failed: {done.stderr.strip()[-800:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=8.0, help="training budget")
    parser.add_argument("--collectors", type=int, default=14,
                        help="CPU collector ranks (8 envs each); one more rank learns")
    parser.add_argument("--device", default="cuda", help="the learner's device")
    parser.add_argument("--dtype", default="bfloat16", choices=("float32", "bfloat16"),
                        help="actor.compute_dtype of the Nature CNN")
    parser.add_argument("--env", default="PongNoFrameskip-v4")
    parser.add_argument("--steps", type=int, default=3_000_000,
                        help="train.total_env_steps (the learning rate decays over it)")
    parser.add_argument("--eval-episodes", type=int, default=3)
    parser.add_argument("--run-dir", type=Path, default=Path("runs/gpu-pong"))
    args = parser.parse_args()
    print(machine_line(), flush=True)
    if args.run_dir.exists():
        raise SystemExit(f"{args.run_dir} exists: pass a new --run-dir")
    code, wall, err = train_for(train_command(args, args.run_dir), 60 * args.minutes)
    if code not in (0, EXIT_PREEMPTED) or not (args.run_dir / "progress.csv").exists():
        print(f"training failed with exit code {code}:\n{err}", file=sys.stderr)
        return 1
    figures = progress(args.run_dir)
    score = evaluate(args.run_dir, args.eval_episodes, args.device)
    print(f"PPO (examples/atari-ppo.yaml) on {args.env}: learner on {args.device}, "
          f"{args.collectors} CPU collector ranks x 8 envs, actor.compute_dtype={args.dtype}")
    print("| env steps | env steps/s | wall s | training return (last 10 rows) | eval |")
    print("|---|---|---|---|---|")
    print(f"| {figures['env_steps']:,.0f} | {figures['fps']:,.0f} | {wall:,.0f} | "
          f"{figures['train_return']:.1f} | {score['mean_return']:.1f} +- "
          f"{score['std_return']:.1f} over {score['episodes']} games |")
    return 0 if figures["env_steps"] > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
