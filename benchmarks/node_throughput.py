"""Atari training throughput on one node: hpcrl's layouts side by side, and Sample Factory.

Every job learns Pong with the Nature CNN and the settings of ``examples/atari-ppo.yaml``
(8 envs per collecting process, 128-step rollouts, 4 epochs of 4 minibatches) for the same
env steps per collecting process, one torch thread per process, and prints env steps per
second of training (start-up excluded), the wall-clock, and each rank's peak resident memory:

* hpcrl in one process, its envs on Gymnasium and on EnvPool (``env.backend``);
* ``a2c`` (PPO, 2 synchronous collector ranks) and ``async-ppo`` (APPO: 2 asynchronous
  collector ranks, policy lag bounded), each acting on the collectors and on one inference
  rank (``scheme.inference_ranks=1``), with and without EnvPool, rollouts and acting through
  the node's shared window (the default); and with an inference rank on EnvPool through MPI
  messages (``scheme.transport=messages``) beside it;
* with ``--sf-python``: Sample Factory's APPO (``sf_examples.atari.train_atari``) with 2 rollout
  workers of 8 envs, the same rollout, batch and network (its ``convnet_simple`` is the Nature
  CNN), on the CPU. Sample Factory needs gymnasium < 1.0 and numpy < 2, so it lives in its own
  virtual environment: ``python -m venv sf && sf/bin/pip install torch sample-factory
  'gymnasium[atari]<1.0' 'numpy<2' opencv-python-headless``, then ``--sf-python sf/bin/python``.
  It counts emulator frames (4 per env step): its figure is divided by 4.

    python benchmarks/node_throughput.py [--steps 8192] [--sf-python PATH]
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from atari_ppo_fps import ENV_ID, ROOT
from machine import machine_line
from mpi_scaling import environment, mpiexec, progress_rows, steps_per_second
from rank_memory import run_sampling_ranks

ENVPOOL = "env.backend=envpool"
GYMNASIUM = "env.backend=gymnasium"
INFERENCE = "scheme.inference_ranks=1"
MESSAGES = "scheme.transport=messages"


def hpcrl_job(steps: int, ranks: int, preset: str, recipe: str,
              sets: tuple[str, ...]) -> dict[str, object]:
    """One hpcrl job on ``ranks`` ranks (under mpiexec even for one, to sample its memory)."""
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        cmd = [mpiexec(), "-n", str(ranks), sys.executable, "-m", "hpcrl.cli", "train",
               str(ROOT / "examples" / recipe), "--run-dir", str(run),
               "--set", f"env.id={ENV_ID}", "--set", f"train.total_env_steps={steps}",
               "--set", "train.eval_episodes=0", "--set", "train.tensorboard=false"]
        if preset:
            cmd += ["--set", f"scheme.preset={preset}"]
        cmd += [arg for key in sets for arg in ("--set", key)]
        start = time.perf_counter()
        peaks = run_sampling_ranks(cmd, ranks)
        wall = time.perf_counter() - start
        fps = steps_per_second(progress_rows(run))
    return {"fps": fps, "wall_s": wall, "peaks": peaks}


# a Sample Factory status line: its time stamp and the frames trained on so far
SF_STATUS = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]\[\d+\] Fps is .*"
                       r"Total num frames: (\d+)")
# Sample Factory spawns its workers: each must import ale_py itself to register the ALE ids
# (gymnasium 0.29's plugin hook fails to, on a circular import)
SF_LAUNCHER = """import sys
import gymnasium
import ale_py
from sf_examples.atari.train_atari import main
if __name__ == "__main__":
    sys.exit(main())
"""


def sample_factory_job(python: str, steps: int) -> dict[str, object]:
    """Sample Factory's APPO on the same game, 2 rollout workers x 8 envs, ``2 * steps``
    env steps. Env steps/s: the frames trained on between its second status line (start-up
    excluded) and its last, over the time between them, / 4 (it counts emulator frames)."""
    with tempfile.TemporaryDirectory() as tmp:
        launcher = Path(tmp) / "train_atari.py"
        launcher.write_text(SF_LAUNCHER)
        cmd = [python, str(launcher), "--algo=APPO", "--async_rl=True", "--env=atari_pong",
               f"--train_dir={tmp}", "--experiment=pong", "--device=cpu", "--num_workers=2",
               "--num_envs_per_worker=8", "--worker_num_splits=1", "--rollout=128",
               "--batch_size=256", "--num_batches_per_epoch=4", "--num_epochs=4",
               f"--train_for_env_steps={2 * steps * 4}", "--with_wandb=False",
               "--save_every_sec=100000", "--decorrelate_envs_on_one_worker=False"]
        start = time.perf_counter()
        done = subprocess.run(cmd, env=environment(), capture_output=True, text=True)
        wall = time.perf_counter() - start
    log = done.stdout + done.stderr
    if done.returncode != 0:
        raise SystemExit(f"Sample Factory failed ({done.returncode}):\n{log[-3000:]}")
    status = [(datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f"), int(m.group(2)))
              for m in SF_STATUS.finditer(log) if int(m.group(2)) > 0]
    fps = float("nan")
    if len(status) > 2:
        (t0, f0), (t1, f1) = status[1], status[-1]
        fps = (f1 - f0) / (t1 - t0).total_seconds() / 4
    return {"fps": fps, "wall_s": wall, "peaks": []}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8192,
                        help="env steps per collecting process")
    parser.add_argument("--sf-python", help="the python of Sample Factory's venv")
    args = parser.parse_args()
    print(machine_line(), flush=True)
    s = args.steps
    jobs = {
        "hpcrl 1 process, gymnasium": lambda: hpcrl_job(s, 1, "", "atari-ppo.yaml", (GYMNASIUM,)),
        "hpcrl 1 process, envpool": lambda: hpcrl_job(s, 1, "", "atari-ppo.yaml", (ENVPOOL,)),
    }
    for preset in ("a2c", "async-ppo"):
        for backend in (GYMNASIUM, ENVPOOL):
            name = backend.split("=")[1]
            jobs[f"{preset} 3 ranks, {name}"] = (
                lambda p=preset, b=backend: hpcrl_job(2 * s, 3, p, "atari-ppo.yaml", (b,)))
            jobs[f"{preset} + inference rank, {name}"] = (
                lambda p=preset, b=backend: hpcrl_job(2 * s, 4, p, "atari-ppo.yaml",
                                                      (b, INFERENCE)))
        # the rows above exchange through the node's shared window (scheme.transport=auto):
        # the same layout with MPI messages beside it
        jobs[f"{preset} + inference, envpool, msgs"] = (
            lambda p=preset: hpcrl_job(2 * s, 4, p, "atari-ppo.yaml",
                                       (ENVPOOL, INFERENCE, MESSAGES)))
    if args.sf_python:
        jobs["sample-factory APPO, 2 workers"] = lambda: sample_factory_job(args.sf_python, s)
    print(f"Pong ({ENV_ID}), Nature CNN, 8 envs x 128 steps per collecting process, "
          f"{s} env steps each, one torch thread per process")
    print(f"{'job':>36} {'env steps/s':>12} {'wall s':>8}  peak MB per rank")
    fps: dict[str, float] = {}
    for name, job in jobs.items():
        result = job()
        fps[name] = float(result["fps"])  # type: ignore[arg-type]
        peaks = " / ".join(f"{p:.0f}" for p in result["peaks"]) or "-"  # type: ignore[union-attr]
        print(f"{name:>36} {fps[name]:12.1f} {result['wall_s']:8.1f}  {peaks}", flush=True)
    base = fps["hpcrl 1 process, gymnasium"]
    for name, value in fps.items():
        print(f"{name} / one process on gymnasium = {value / base:.2f}x")
    best = max((n for n in fps if not n.startswith("sample-factory")), key=fps.get)
    if args.sf_python:
        sf = fps["sample-factory APPO, 2 workers"]
        print(f"best hpcrl layout ({best}) / Sample Factory = {fps[best] / sf:.2f}x (goal >= 1)")


if __name__ == "__main__":
    main()
