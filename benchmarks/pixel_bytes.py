"""What carrying Atari frames as uint8 saves: bytes of one rollout message, and the peak
resident memory of each rank of a job, uint8 frames against the same job carrying float32.

The rollout figures come from the message layout itself (``examples/atari-ppo.yaml``: 8 envs
x 128 steps of ``[4, 84, 84]`` frames). The memory figures come from two short runs of the
recipe under ``mpiexec`` with ``scheme.preset`` (``a2c`` by default: one learner, two
collector ranks), sampling each rank's VmRSS: one as configured (uint8), one with
``env.normalize_obs=true``, the one setting that makes hpcrl carry frames as float32 (the
normalised values are real numbers).

    pip install -e '.[atari,mpi]'
    python benchmarks/pixel_bytes.py [--steps 3072] [--preset a2c] [--ranks 3]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from machine import machine_line
from mpi_scaling import mpiexec
from rank_memory import run_sampling_ranks

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "examples" / "atari-ppo.yaml"


def rollout_bytes(dtype: str, num_steps: int = 128, num_envs: int = 8) -> int:
    """Bytes of one rollout message (step buffer and header) carrying ``dtype`` frames."""
    from hpcrl.buffers.rollout import RolloutLayout

    layout = RolloutLayout(num_steps, num_envs, (4, 84, 84), (), dtype)
    return layout.data_size * 4 + layout.header_size * 8


def peak_rss_per_rank(ranks: int, preset: str, steps: int, extra: list[str]) -> list[float]:
    """Peak VmRSS (MB) of each rank of one run of the recipe, sampled every 0.2 s."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [mpiexec(), "-n", str(ranks), sys.executable, "-m", "hpcrl.cli", "train",
               str(RECIPE), "--run-dir", f"{tmp}/run", "--set", f"scheme.preset={preset}",
               "--set", f"train.total_env_steps={steps}", "--set", "train.eval_episodes=0",
               "--set", "train.tensorboard=false"]
        for item in extra:
            cmd += ["--set", item]
        return run_sampling_ranks(cmd, ranks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3072)
    parser.add_argument("--preset", default="a2c")
    parser.add_argument("--ranks", type=int, default=3)
    parser.add_argument("--env", default="PongNoFrameskip-v4")
    args = parser.parse_args()
    print(machine_line(), flush=True)
    small, big = rollout_bytes("uint8"), rollout_bytes("float32")
    print("one rollout message, 8 envs x 128 steps of [4, 84, 84] frames:")
    print(f"  uint8 {small / 2**20:8.2f} MB   float32 {big / 2**20:8.2f} MB   "
          f"ratio {big / small:.2f}x")
    env = [f"env.id={args.env}"]
    runs = {"uint8": peak_rss_per_rank(args.ranks, args.preset, args.steps, env),
            "float32": peak_rss_per_rank(args.ranks, args.preset, args.steps,
                                         env + ["env.normalize_obs=true"])}
    print(f"peak RSS per rank, {args.env}, {args.ranks} ranks ({args.preset}), "
          f"{args.steps} env steps:")
    print(f"{'rank':>6} {'uint8 MB':>10} {'float32 MB':>11} {'saved MB':>9}")
    for rank in range(args.ranks):
        a, b = runs["uint8"][rank], runs["float32"][rank]
        print(f"{rank:>6} {a:10.0f} {b:11.0f} {b - a:9.0f}")


if __name__ == "__main__":
    main()
