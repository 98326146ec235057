"""Connect four by self-play, hpcrl beside RLlib's own example (issue 53, docs/multiagent.md).

Two measures:

1. RLlib's own: the wall-clock time, from launching the process, until the main policy has
   won more than 95 % of its last 100 training matches against random play, the moment
   RLlib's ``self_play_with_open_spiel.py`` adds its first frozen ``main_v1`` (its
   ``--win-rate-threshold`` 0.95, window 100). hpcrl runs examples/connect-four-league.yaml
   with the same rule (``env.league.win_threshold: 0.95``, ``threshold_matches: 100``, no
   periodic snapshots): the moment of its first snapshot file.
2. Separate evaluation: the training seconds until the main policy wins 95 % of 200 matches
   against random play (its most probable legal move), hpcrl's every 10,000 env steps
   (train.eval_every), RLlib's checkpoints (one an iteration) evaluated afterwards by
   benchmarks/rllib_connect_four_eval.py.
Both run on this machine, one after the other; RLlib at its example's own settings (PPO,
512x512 network, 20 epochs) but one env runner beside its learner (its default of two asks
Ray for 3 CPUs: on 2 CPUs the trial never starts), from its own virtual environment.

    python benchmarks/connect_four_vs_rllib.py --rllib-python /tmp/rllib-venv/bin/python
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from machine import machine_line  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RULE = ["env.league.win_threshold=0.95", "env.league.threshold_matches=100",
        "env.league.snapshot_every=0", "train.eval_every=10000", "train.eval_episodes=200",
        "train.total_env_steps=2000000"]


def watch(command: list[str], done: Callable[[], bool], limit_s: float,
          env: dict[str, str] | None = None, log: Path | None = None) -> float | None:
    """Run ``command``, polling ``done()`` twice a second; the seconds from the
    launch to the first True (None past ``limit_s``); the process is stopped either way."""
    out = open(log or os.devnull, "w")
    start = time.monotonic()
    proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)
    found = None
    try:
        while time.monotonic() - start < limit_s and proc.poll() is None:
            time.sleep(0.5)
            if done():
                found = time.monotonic() - start
                break
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
        proc.wait()
        out.close()
    return found


def first_eval_at(eval_csv: Path, win_rate: float) -> tuple[float, int] | None:
    """The training seconds and env steps of the first evaluation in ``eval_csv`` won at
    ``win_rate`` or better (a board game's mean return is 2 x win rate - 1, draws half)."""
    if not eval_csv.is_file():
        return None
    with eval_csv.open() as src:
        for row in csv.DictReader(src):
            if (float(row["mean_return"]) + 1) / 2 >= win_rate:
                return float(row["wall_time_s"]), int(row["env_steps"])
    return None


def hpcrl_run(work: Path, limit_s: float) -> dict[str, object]:
    """hpcrl's two times: to its first threshold snapshot (RLlib's rule) from the launch, and
    to its first separate evaluation won at 95 % against random play (training seconds)."""
    run = work / "hpcrl"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    recipe = str(ROOT / "examples/connect-four-league.yaml")
    command = [sys.executable, "-m", "hpcrl.cli", "train", recipe, "--run-dir", str(run)]
    command += [a for s in RULE for a in ("--set", s)]
    folder = run / "league" / "snapshots"
    marks: dict[str, float] = {}
    start = time.monotonic()

    def both() -> bool:
        if "snapshot" not in marks and folder.is_dir() and any(folder.glob("*.pt")):
            marks["snapshot"] = time.monotonic() - start
        return "snapshot" in marks and first_eval_at(run / "eval.csv", 0.95) is not None

    watch(command, both, limit_s, env, work / "hpcrl.log")
    result: dict[str, object] = {"system": "hpcrl", "seconds": marks.get("snapshot")}
    evaluated = first_eval_at(run / "eval.csv", 0.95)
    if evaluated is not None:
        result["eval_training_s"], result["eval_env_steps"] = evaluated
    if folder.is_dir() and any(folder.glob("*.pt")):
        snap = sorted(folder.glob("*.pt"))[0]
        result["env_steps"] = int(snap.stem.split("-")[-1])
        played = subprocess.run([sys.executable, "-m", "hpcrl.cli", "eval", str(snap), "-n",
                                 "200", "--opponent", "random"], capture_output=True, text=True,
                                env=env, check=True)
        result["snapshot_eval"] = played.stdout.strip().splitlines()[-1]
    return result


def rllib_run(python: str, work: Path, limit_s: float, extra: list[str]
              ) -> dict[str, object]:
    """RLlib's example's time to adding ``main_v1`` from the launch (None: never within the
    limit), then every other checkpoint of its trial against random play in separate matches
    (benchmarks/rllib_connect_four_eval.py): the first won at 95 %."""
    example = subprocess.run([python, "-c", "import ray.rllib.examples.multi_agent."
                              "self_play_with_open_spiel as m; print(m.__file__)"],
                             capture_output=True, text=True, check=True).stdout.strip()
    log = work / "rllib.log"
    env = {**os.environ, "RAY_DEDUP_LOGS": "0"}
    results = Path.home() / "ray_results"
    before = set(results.glob("*/*/progress.csv")) if results.is_dir() else set()
    seconds = watch([python, example, "--num-episodes-human-play=0", *extra],
                    lambda: "adding new opponent" in log.read_text(errors="ignore"), limit_s,
                    env, log)
    lines = [line for line in log.read_text(errors="ignore").splitlines() if "Iter=" in line]
    result: dict[str, object] = {"system": "rllib", "seconds": seconds,
                                 "iterations": len(lines),
                                 "last": lines[-1].split(")")[-1].strip() if lines else ""}
    trials = sorted(set(results.glob("*/*/progress.csv")) - before)
    if trials:
        done = subprocess.run([python, str(Path(__file__).parent / "rllib_connect_four_eval.py"),
                               str(trials[-1].parent), "--every", "2"],
                              capture_output=True, text=True, check=True)
        evals = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        result["evaluations"] = len(evals)
        first = next((e for e in evals if e["win_rate"] >= 0.95), None)
        if first is not None:
            result["eval_training_s"] = first["time_total_s"]
            result["eval_env_steps"] = first["env_steps"]
        if evals:
            result["last_eval"] = evals[-1]
    return result


def main() -> None:
    """Run both and print the table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rllib-python", default=None,
                        help="The Python of a virtual environment with ray[rllib] and "
                             "open-spiel (RLlib's side is skipped without it).")
    parser.add_argument("--limit-s", type=float, default=1800.0,
                        help="Give up on a system after this many seconds.")
    parser.add_argument("--json", default=None, help="Append the results to this file.")
    parser.add_argument("--rllib-args", nargs="*", default=["--num-env-runners=1"],
                        help="Arguments of RLlib's example (default: one env runner beside "
                             "its learner: its own 2 runners and learner ask Ray for 3 CPUs, "
                             "and on a 2-CPU machine the trial stays PENDING).")
    parser.add_argument("--systems", nargs="+", default=["hpcrl", "rllib"],
                        choices=["hpcrl", "rllib"], help="Which to run (default: both).")
    args = parser.parse_args()
    print(machine_line(), flush=True)
    work = Path(tempfile.mkdtemp(prefix="c4-vs-rllib-"))
    results = []
    if "hpcrl" in args.systems:
        results.append(hpcrl_run(work, args.limit_s))
        print(json.dumps(results[-1]), flush=True)
    if args.rllib_python and "rllib" in args.systems:
        results.append(rllib_run(args.rllib_python, work, args.limit_s, args.rllib_args))
        print(json.dumps(results[-1]), flush=True)
    print(f"{'system':<8} {'s to > 95 % of 100 training matches':>38} "
          f"{'training s to 95 % in 200 eval matches':>40}")
    for r in results:
        s = r["seconds"]
        shown = f"> {args.limit_s:.0f}" if s is None else f"{s:.1f}"
        e = r.get("eval_training_s")
        evaluated = "not reached" if e is None else f"{e:.1f} ({r['eval_env_steps']:,} steps)"
        print(f"{r['system']:<8} {shown:>38} {evaluated:>40}")
    times = [r.get("eval_training_s") for r in results]
    if len(times) == 2 and all(isinstance(t, float) for t in times):
        print(f"hpcrl / rllib, training seconds to 95 % in evaluation = "
              f"{times[0] / times[1]:.2f} (goal <= 0.5)")
    if args.json:
        with open(args.json, "a") as out:
            for r in results:
                out.write(json.dumps(r) + "\n")
    print(f"logs: {work}")


if __name__ == "__main__":
    main()
