"""Collection scaling of the IMPALA and Ape-X presets, from real `mpiexec` jobs.

With the learner's update rate held low (IMPALA: one small gradient step per update; Ape-X:
a low replay ratio), the learner is not the bottleneck, so env steps per second should grow
with the collector ranks: target >= 1.5x from 1 to 2 collector ranks on this 2-core
machine. Each line also gives the mean policy lag the preset ran with (IMPALA: updates
between the weights that collected a rollout and the learner's when it trained on it;
Ape-X: gradient steps between a chunk's weights and the learner's when it reached the
replay) and, for Ape-X, the replay ratio reached.

    python benchmarks/async_presets.py
"""
from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from mpi_scaling import LIGHT, command, environment, progress_rows, steps_per_second
from machine import machine_line

IMPALA = ["scheme.preset=impala", "train.total_env_steps=196608", "algo.num_steps=256",
          "env.num_envs=8"]
APEX = ["scheme.preset=apex", "train.total_env_steps=98304", "algo.num_steps=64",
        "env.num_envs=8", "replay.learning_starts=1000", "replay.batch_size=32",
        "replay.train_freq=64", "replay.gradient_steps=1", "replay.buffer_size=100000"]


def run_rows(n: int, sets: list[str]) -> list[dict[str, str]]:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(command(n, Path(tmp) / "run", LIGHT + sets), check=True,
                       env=environment(), stderr=subprocess.DEVNULL)
        return progress_rows(Path(tmp) / "run")


def figures(rows: list[dict[str, str]]) -> dict[str, float]:
    """Env steps/s after the first row (start-up excluded), mean policy lag and ratio."""
    first, last = rows[0], rows[-1]
    steps = float(last["env_steps"]) - float(first["env_steps"])
    out = {"fps": steps_per_second(rows),
           "lag": sum(float(r["policy_lag"]) for r in rows[1:]) / max(len(rows) - 1, 1)}
    if "replay_ratio" in first:
        grads = sum(float(r["replay_ratio"]) * (float(r["env_steps"]) - float(p["env_steps"]))
                    for p, r in zip(rows, rows[1:]))
        out["ratio"] = grads / steps
    return out


def compare(name: str, sets: list[str], lag_unit: str) -> float:
    one = figures(run_rows(2, sets + ["scheme.collectors_per_worker=1"]))
    two = figures(run_rows(3, sets + ["scheme.collectors_per_worker=2"]))
    for k, f in ((1, one), (2, two)):
        ratio = f" | replay ratio {f['ratio']:.4f}" if "ratio" in f else ""
        print(f"{name}, {k} collector rank{'s' if k > 1 else ' '}: {f['fps']:9,.0f} env steps/s"
              f" | policy lag {f['lag']:7.1f} {lag_unit}{ratio}")
    gain = two["fps"] / one["fps"]
    print(f"{name}, 2 vs 1 collector ranks: {gain:.2f}x (target >= 1.5x)")
    return gain


def main() -> None:
    print(machine_line(), flush=True)
    print("Asynchronous presets (pip MPICH, 2 cores, OMP_NUM_THREADS=1, CartPole-v1)")
    compare("impala", IMPALA, "updates")
    compare("apex  ", APEX, "gradient steps")


if __name__ == "__main__":
    main()
