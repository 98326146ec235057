"""Collection scaling of the IMPALA and Ape-X presets, from real `mpiexec` jobs.

With the learner's update rate held low (IMPALA: one small gradient step per update; Ape-X:
a low replay ratio), the learner is not the bottleneck, so env steps per second should grow
with the collector ranks: target >= 1.5x from 1 to 2 collector ranks on this 2-core
machine; also for the ResNet agent (IMPALA's network on MinAtar), whose collectors spend
most of their time acting. Each line also gives the mean policy lag the preset ran with
(IMPALA: updates
between the weights that collected a rollout and the learner's when it trained on it;
Ape-X: gradient steps between a chunk's weights and the learner's when it reached the
replay) and, for Ape-X, the replay ratio reached.

    python benchmarks/async_presets.py
"""
from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from machine import machine_line
from mpi_scaling import LIGHT, command, environment, progress_rows, steps_per_second

IMPALA = ["scheme.preset=impala", "train.total_env_steps=196608", "algo.num_steps=256",
          "env.num_envs=8"]
APEX = ["scheme.preset=apex", "train.total_env_steps=98304", "algo.num_steps=64",
        "env.num_envs=8", "replay.learning_starts=1000", "replay.batch_size=32",
        "replay.train_freq=64", "replay.gradient_steps=1", "replay.buffer_size=100000"]


# the ResNet agent: IMPALA's network on MinAtar, where acting costs a collector most of its time
RESNET = ["scheme.preset=impala", "env.id=MinAtar/Breakout-v1", "actor.encoder=impala_resnet",
          "actor.features=64", "actor.hidden_sizes=[]", "train.total_env_steps=24576",
          "algo.num_steps=64", "env.num_envs=8"]


def run_rows(n: int, sets: list[str]) -> list[dict[str, str]]:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(command(n, Path(tmp) / "run", LIGHT + sets), check=True,
                       env=environment(), stderr=subprocess.DEVNULL)
        return progress_rows(Path(tmp) / "run")


def figures(rows: list[dict[str, str]], rollout_steps: int = 0) -> dict[str, float]:
    """Env steps/s trained on after the first row (start-up excluded), mean policy lag and
    ratio; with ``rollout_steps`` (env steps of one rollout) also the env steps/s collected:
    trained, plus the rollouts dropped for exceeding the policy-lag bound."""
    first, last = rows[0], rows[-1]
    steps = float(last["env_steps"]) - float(first["env_steps"])
    span = float(last["wall_time_s"]) - float(first["wall_time_s"])
    dropped = sum(float(r.get("dropped_rollouts") or 0) for r in rows[1:])
    waited = sum(float(r.get("time_wait_s") or 0) for r in rows[1:])
    out = {"fps": steps_per_second(rows), "collected": (steps + dropped * rollout_steps) / span,
           "waiting": waited / span,  # the learner's share of the time spent waiting for data
           "lag": sum(float(r["policy_lag"]) for r in rows[1:]) / max(len(rows) - 1, 1)}
    if "replay_ratio" in first:
        grads = sum(float(r["replay_ratio"]) * (float(r["env_steps"]) - float(p["env_steps"]))
                    for p, r in zip(rows, rows[1:], strict=False))
        out["ratio"] = grads / steps
    return out


def compare(name: str, sets: list[str], lag_unit: str, rollout_steps: int = 0) -> float:
    """1 against 2 collector ranks; with ``rollout_steps`` (an on-policy rollout's env steps)
    also the steps collected, dropped rollouts included."""
    one = figures(run_rows(2, sets + ["scheme.collectors_per_worker=1"]), rollout_steps)
    two = figures(run_rows(3, sets + ["scheme.collectors_per_worker=2"]), rollout_steps)
    for k, f in ((1, one), (2, two)):
        ratio = f" | replay ratio {f['ratio']:.4f}" if "ratio" in f else ""
        collected = (f" | collected {f['collected']:9,.0f} env steps/s" if rollout_steps
                     else "")
        waiting = f" | learner waits {f['waiting']:.0%}" if rollout_steps else ""
        print(f"{name}, {k} collector rank{'s' if k > 1 else ' '}: {f['fps']:9,.0f} env steps/s"
              f" trained{collected} | policy lag {f['lag']:7.1f} {lag_unit}{ratio}{waiting}")
    gain = two["fps"] / one["fps"]
    print(f"{name}, 2 vs 1 collector ranks: {gain:.2f}x trained (target >= 1.5x)"
          + (f", {two['collected'] / one['collected']:.2f}x collected" if rollout_steps
             else ""))
    return gain


def main() -> None:
    print(machine_line(), flush=True)
    print("Asynchronous presets (pip MPICH, 2 cores, OMP_NUM_THREADS=1, CartPole-v1)")
    compare("impala", IMPALA, "updates")
    compare("apex  ", APEX, "gradient steps")
    print("The ResNet agent (impala preset, IMPALA ResNet, MinAtar/Breakout-v1)")
    compare("impala resnet", RESNET, "updates", rollout_steps=64 * 8)


if __name__ == "__main__":
    main()
