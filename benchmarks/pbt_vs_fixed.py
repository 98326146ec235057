"""Population-based training against the same population without exploit-and-explore, at
equal compute (issue 54, docs/pbt.md).

For each population seed, ``hpcrl pbt`` trains the task's population twice in this run:
with ``pbt.exploit: true`` (lagging members copy a leader and mutate its values) and with
``pbt.exploit: false`` (each member trains the values it drew to the end: random search).
Both draw the same initial values from the same ranges (the population's seed), give every
member the same budget, and train the same members side by side on this machine. Prints the
CPU beside the figures: each population's best and median member's final evaluation, and
their means over the seeds.

    python benchmarks/pbt_vs_fixed.py --task lunarlander --seeds 0 1 2
    python benchmarks/pbt_vs_fixed.py --task minatar --seeds 0 1 2 --json results.jsonl
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).parent))
from machine import machine_line  # noqa: E402

# each task: the config every member trains, and its population; the lr range is the issue's
TASKS: dict[str, dict[str, Any]] = {
    # PPO on LunarLander-v3 with larger minibatches than RL-zoo's recipe (16 envs x 256
    # steps, minibatch 512: ~19k env steps/s on one core here), 400k env steps a member
    "lunarlander": {
        "env": {"id": "LunarLander-v3", "num_envs": 16},
        "actor": {"hidden_sizes": [64, 64], "activation": "tanh", "shared_trunk": False},
        "algo": {"name": "ppo", "num_steps": 256, "gamma": 0.999, "gae_lambda": 0.98,
                 "ent_coef": 0.01, "lr": 3e-4, "lr_schedule": "constant",
                 "ppo": {"minibatch_size": 512, "num_epochs": 4, "clip_range": 0.2,
                         "clip_schedule": "constant"}},
        "train": {"total_env_steps": 409_600, "eval_episodes": 20},
        "pbt": {"members": 4, "interval_env_steps": 40_960,
                "mutate": {"algo.lr": {"low": 1e-5, "high": 1e-2, "scale": "log"}}},
    },
    # PPO on MinAtar Breakout (10x10x4 binary frames) through an MLP of 2 x 256 (MinAtar's
    # frames are small enough; examples/minatar-ppo.yaml's ResNet trains 2,000 env steps/s on
    # a core here, too slow for 24 populations), 500k env steps a member
    "minatar": {
        "env": {"id": "MinAtar/Breakout-v1", "num_envs": 16},
        "actor": {"hidden_sizes": [256, 256], "activation": "relu", "shared_trunk": True},
        "algo": {"name": "ppo", "num_steps": 128, "gamma": 0.99, "gae_lambda": 0.95,
                 "lr": 2.5e-4, "lr_schedule": "constant", "ent_coef": 0.01,
                 "ppo": {"minibatch_size": 512, "num_epochs": 4, "clip_range": 0.2,
                         "clip_schedule": "constant"}},
        "train": {"total_env_steps": 501_760, "eval_episodes": 20},
        "pbt": {"members": 4, "interval_env_steps": 51_200,
                "mutate": {"algo.lr": {"low": 1e-5, "high": 1e-2, "scale": "log"},
                           "algo.ent_coef": {"low": 1e-4, "high": 0.1, "scale": "log"}}},
    },
}


def population(task: str, seed: int, exploit: bool, root: Path) -> dict[str, Any]:
    """Train one population; its members' final evaluations and the wall seconds."""
    config = {**TASKS[task], "seed": seed}
    config["pbt"] = {**config["pbt"], "exploit": exploit}
    root.mkdir(parents=True, exist_ok=True)
    path = root / "pbt.yaml"
    path.write_text(yaml.safe_dump(config))
    run = root / "population"
    started = time.time()
    done = subprocess.run([sys.executable, "-m", "hpcrl.cli", "pbt", str(path), "--run-dir",
                           str(run)], env={**os.environ, "OMP_NUM_THREADS": "1"},
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"population {task} seed {seed} exploit {exploit} failed:\n"
                         f"{done.stderr[-2000:]}")
    finals = [json.loads((member / "eval.json").read_text())["mean_return"]
              for member in sorted(run.glob("member-*"))]
    copies = len({(line.split(",")[1], line.split(",")[2])
                  for line in (run / "population" / "lineage.csv").read_text().splitlines()[1:]}
                 ) if (run / "population" / "lineage.csv").exists() else 0
    return {"task": task, "seed": seed, "exploit": exploit, "finals": finals,
            "best": max(finals), "median": statistics.median(finals), "copies": copies,
            "seconds": time.time() - started, "machine": machine_line()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", choices=sorted(TASKS), default="lunarlander")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", type=Path, default=None, help="Where the populations go "
                        "(default: a temporary directory).")
    parser.add_argument("--json", type=Path, default=None, help="Append results here.")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="hpcrl-pbt-"))
    print(machine_line(), flush=True)
    results = []
    for seed in args.seeds:
        for exploit in (True, False):
            name = "with" if exploit else "without"
            result = population(args.task, seed, exploit, out / f"{name}-seed{seed}")
            results.append(result)
            print(f"{args.task} seed {seed} {name:>7} exploit: best {result['best']:8.1f}  "
                  f"median {result['median']:8.1f}  copies {result['copies']:3d}  members "
                  f"{', '.join(f'{f:.1f}' for f in result['finals'])}  "
                  f"{result['seconds']:.0f} s", flush=True)
            if args.json is not None:
                with open(args.json, "a") as f:
                    f.write(json.dumps(result) + "\n")
    for exploit in (True, False):
        chosen = [r for r in results if r["exploit"] == exploit]
        print(f"{args.task} mean over {len(chosen)} seeds, {'with' if exploit else 'without'} "
              f"exploit: best {statistics.mean(r['best'] for r in chosen):.1f}, median "
              f"{statistics.mean(r['median'] for r in chosen):.1f}")


if __name__ == "__main__":
    main()
