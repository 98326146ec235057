"""Bit for bit: the largest weight difference between layouts, and between runs, of one
seeded job (docs/topology.md: Reproducible weights).

Each layout trains PPO on CartPole-v1 with ``seed=4`` for 16 updates of 256 env steps (8
envs in all), as a user runs it (``[mpiexec -n N] python -m hpcrl.cli train --set ...``),
and the rows compare the ``policy.state_dict`` of their final checkpoints:

    python benchmarks/reproducibility.py                     # every row, a few minutes
    python benchmarks/reproducibility.py --rows a2c-lz4 inference-twice
    python benchmarks/reproducibility.py --set train.deterministic=false
    python benchmarks/reproducibility.py --speed             # what computing rows alone costs

``--speed`` times the numpy engine's step (an MLP actor-critic's acting forward and
sampling) on batches of 2 to 64 rows, multiplying whole batches and every row alone (a
deterministic job's), the fastest of 9 repeats.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
BASE = ["seed=4", "train.total_env_steps=4096", "train.tensorboard=false",
        "train.eval_episodes=0", "train.log_interval_s=60", "train.checkpoint_every=100"]
A2C = ["scheme.preset=a2c", "env.num_envs=4"]  # 2 collector ranks x 4 envs, 1 learner
DDPPO = ["scheme.preset=ddppo", "env.num_envs=4", "scheme.preemption.fraction_workers=1",
         "scheme.preemption.fraction_samples=1"]
# a torch-acting actor: its inference rank runs one request at a time under true alone
GRU = ["actor.memory=gru", "actor.memory_size=16", "train.deterministic=true",
       "scheme.inference_device=cpu"]
NORMALISED = ["env.normalize_obs=true", "env.normalize_reward=true"]
SERIAL = ["env.num_envs=8"]
INFERENCE = ["scheme.inference_ranks=1"]

# the jobs: name -> (ranks, --set items)
JOBS = {
    "serial": (1, SERIAL),
    "serial-normalised": (1, SERIAL + NORMALISED),
    "a2c-lz4": (3, A2C + ["scheme.compress=lz4", "scheme.transport=messages"]),
    "a2c-normalised": (3, A2C + NORMALISED),
    "a2c": (3, A2C),
    "inference": (4, A2C + INFERENCE),
    "inference-again": (4, A2C + INFERENCE),
    "inference-1-group": (4, A2C + INFERENCE + ["scheme.env_groups=1"]),
    "inference-1-group-again": (4, A2C + INFERENCE + ["scheme.env_groups=1"]),
    "gru-inference": (4, A2C + INFERENCE + GRU),
    "gru-inference-again": (4, A2C + INFERENCE + GRU),
    "ddppo": (2, DDPPO),
    "ddppo-again": (2, DDPPO),
}
# the rows: name -> (what, job, job)
ROWS = {
    "a2c-lz4": ("2 collector ranks x 4 envs + lz4 vs 1 x 8 in one process", "a2c-lz4",
                "serial"),
    "a2c-normalised": ("the same, normalised observations and returns",
                       "a2c-normalised", "serial-normalised"),
    "inference": ("acting on an inference rank (2 env groups) vs on the collectors",
                  "inference", "a2c"),
    "inference-twice": ("the a2c job with an inference rank and 2 env groups, run twice",
                        "inference", "inference-again"),
    "one-group-twice": ("the same with scheme.env_groups=1, run twice", "inference-1-group",
                        "inference-1-group-again"),
    "gru-twice": ("a GRU actor on an inference rank, train.deterministic=true, twice",
                  "gru-inference", "gru-inference-again"),
    "ddppo": ("ddppo: 2 gradient ranks x 4 envs vs 1 x 8 (no preemption)", "ddppo", "serial"),
    "ddppo-twice": ("ddppo run twice", "ddppo", "ddppo-again"),
}


def train(job: str, sets: list[str], run_dir: Path) -> dict[str, torch.Tensor]:
    ranks, own = JOBS[job]
    mpiexec = (shutil.which("mpiexec", path=os.path.dirname(sys.executable))
               or shutil.which("mpiexec"))
    cmd = ([mpiexec, "-n", str(ranks)] if ranks > 1 else []) + [
        sys.executable, "-m", "hpcrl.cli", "train", "--run-dir", str(run_dir)]
    for item in BASE + own + sets:
        cmd += ["--set", item]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=900,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    if done.returncode != 0:
        raise SystemExit(f"{job} failed:\n{done.stderr[-3000:]}")
    saved = torch.load(run_dir / "checkpoints" / "last.pt", weights_only=False)
    return saved["policy"]["state_dict"]


def largest_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]
                       ) -> tuple[float, list[str]]:
    """The largest difference of any parameter or buffer, and the names that differ."""
    differ = [k for k in a if not torch.equal(a[k], b[k])]
    return max(((a[k] - b[k]).abs().max().item() for k in a), default=0.0), differ


def engine_speed(env_ids: tuple[str, ...] = ("CartPole-v1", "Pendulum-v1")) -> None:
    """Microseconds of a numpy engine step, whole batches against rows alone."""
    import timeit

    import numpy as np

    from hpcrl.build import env_spaces, make_actor
    from hpcrl.config import from_dict
    from hpcrl.models.acting import make_engine
    from hpcrl.runtime.cpu import set_compute_threads

    set_compute_threads(1)
    print(f"{'env':<14}{'rows':>5}{'batched us':>12}{'rows alone us':>15}")
    for env_id in env_ids:
        config = from_dict({}, [f"env.id={env_id}"])
        spaces = env_spaces(config)
        actor = make_actor(config, spaces)
        engines = [make_engine(actor), make_engine(actor, rows_alone=True)]
        rng = np.random.default_rng(0)
        for rows in (2, 4, 8, 16, 64):
            obs = rng.standard_normal((rows,) + tuple(spaces.obs_shape)).astype(np.float32)
            shape = (rows,) + tuple(actor.distribution.noise_shape())
            noise = (rng.random(shape, dtype=np.float32) if actor.distribution.uniform_noise
                     else rng.standard_normal(shape, dtype=np.float32))
            times = [min(timeit.repeat(lambda e=e, o=obs, n=noise: e.step(o, n), number=2000,
                                       repeat=9)) / 2000 * 1e6 for e in engines]
            print(f"{env_id:<14}{rows:>5}{times[0]:>12.1f}{times[1]:>15.1f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", nargs="+", choices=list(ROWS), default=list(ROWS))
    parser.add_argument("--set", dest="sets", action="append", default=[],
                        metavar="KEY=VALUE", help="added to every job")
    parser.add_argument("--speed", action="store_true",
                        help="time the numpy engine instead (see the module's docstring)")
    args = parser.parse_args()
    if args.speed:
        engine_speed()
        return
    trained: dict[str, dict[str, torch.Tensor]] = {}
    with tempfile.TemporaryDirectory(prefix="hpcrl-bits-") as tmp:
        for row in args.rows:
            what, first, second = ROWS[row]
            for job in (first, second):
                if job not in trained:
                    trained[job] = train(job, args.sets, Path(tmp) / job)
            diff, differ = largest_difference(trained[first], trained[second])
            names = "" if not differ or len(differ) > 3 else f"  ({', '.join(differ)})"
            print(f"{what:<70} {diff:.1e}{names}", flush=True)


if __name__ == "__main__":
    main()
