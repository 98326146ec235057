"""The learning curve of PPO on MinAtar (``examples/minatar-ppo.yaml``, 1M env steps by
default): the mean training return at fixed step counts, the deterministic evaluation at the
end, and the curve as a PNG.

    pip install -e '.[minatar,bench]'
    python benchmarks/minatar_curve.py [--env MinAtar/Breakout-v1] [--steps 1000000]
                                       [--run-dir runs/minatar] [--png minatar.png]
                                       [--set seed=1 --set actor.compute_dtype=bfloat16]
    python benchmarks/minatar_curve.py --plot-only runs/minatar   # a finished run

The run is an ordinary ``hpcrl train`` of the recipe, so ``--resume`` continues it.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from machine import machine_line

MARKS = (100_000, 250_000, 500_000, 750_000, 1_000_000)


def read_curve(run: Path) -> tuple[list[int], list[float]]:
    """Env steps and mean training return of each progress row that has finished episodes."""
    steps, returns = [], []
    with open(run / "progress.csv", newline="") as f:
        for row in csv.DictReader(f):
            value = row.get("episode_return_mean", "")
            if value not in ("", "nan"):
                steps.append(int(float(row["env_steps"])))
                returns.append(float(value))
    return steps, returns


def plot(steps: list[int], returns: list[float], title: str, png: Path) -> None:
    """The curve as a PNG (matplotlib, from the ``bench`` extra)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=120)
    ax.plot([s / 1e6 for s in steps], returns, lw=1.2)
    ax.set_xlabel("env steps (millions)")
    ax.set_ylabel("mean episode return (training)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(png)


def report(run: Path, env_id: str, png: Path) -> None:
    steps, returns = read_curve(run)
    if not steps:
        raise SystemExit(f"{run}/progress.csv has no finished episodes yet")
    print(f"PPO on {env_id} (examples/minatar-ppo.yaml), run {run}")
    print(f"{'env steps':>10} {'mean return':>12}")
    for mark in MARKS:
        seen = [r for s, r in zip(steps, returns, strict=False) if s <= mark]
        if seen and steps[-1] >= mark:
            print(f"{mark:>10,} {seen[-1]:12.2f}")
    print(f"{steps[-1]:>10,} {returns[-1]:12.2f}  (last row)")
    result = run / "eval.json"
    if result.is_file():
        ev = json.loads(result.read_text())
        print(f"deterministic eval over {ev['episodes']} episodes: "
              f"{ev['mean_return']:.2f} +- {ev['std_return']:.2f}")
    plot(steps, returns, f"PPO on {env_id}", png)
    print(f"curve: {png}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="MinAtar/Breakout-v1")
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--run-dir", type=Path, default=Path("runs/minatar-curve"))
    parser.add_argument("--png", type=Path, default=None)
    parser.add_argument("--plot-only", type=Path, default=None)
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                        help="a config key over the recipe's (repeatable), e.g. seed=1 or "
                             "actor.compute_dtype=bfloat16")
    args = parser.parse_args()
    print(machine_line(), flush=True)
    if args.plot_only:
        run = args.plot_only
        import yaml
        env_id = yaml.safe_load((run / "config.yaml").read_text())["env"]["id"]
    else:
        run = args.run_dir
        recipe = Path(__file__).resolve().parents[1] / "examples" / "minatar-ppo.yaml"
        hpcrl = Path(sys.executable).with_name("hpcrl")
        start = time.perf_counter()
        subprocess.run([str(hpcrl), "train", str(recipe), "--run-dir", str(run),
                        "--set", f"env.id={args.env}", "--set",
                        f"train.total_env_steps={args.steps}"]
                       + [arg for key in args.sets for arg in ("--set", key)],
                       env={**os.environ, "OMP_NUM_THREADS": "1"}, check=True)
        print(f"wall-clock: {time.perf_counter() - start:.0f} s")
        env_id = args.env
    report(run, env_id, args.png or run / "curve.png")


if __name__ == "__main__":
    main()
