"""The real job machinery at 8 to 64 ranks (as memory allows), compute replaced by sleeps
(benchmarks/emulation.py); the cost model against it; the model's tables for docs/scaling.md.

1. Calibration: a short serial run of the real agent (examples/atari-ppo.yaml on this
   machine) gives the seconds of one collection (8 envs x 128 steps) and of one gradient
   step; ``--calibration RUN_DIR`` takes a run's own progress.csv instead.
2. For each preset and rank count, an ``mpiexec -n N hpcrl train`` job of the emulated agent
   (Atari frames, the Nature CNN's parameter count, sleeping env steps and gradient steps,
   every sleep times ``--dilation`` so that the ranks' own CPU work stays a small share of
   2 cores). Per update it reports the time not spent in emulated compute (coordination):
   update wall time minus the mean collection and compute times, split into the wait for
   rollouts (``time_wait_s``), gradient exchange (``time_communicate_s``) and the rest
   (rank 0's reports and decisions, row writing, checkpoints). It samples each rank's RSS
   and skips a job that would take the machine past ``--memory-gb`` in use (estimated from
   the preset's last job).
3. ``--compare``: the cost model (:mod:`hpcrl.scheme.cost_model`), calibrated on each
   preset's smallest run (with a host link fitted to its all-reduce), predicts each larger
   run's update time; the error is printed beside the measurement.

    python benchmarks/scaling.py --ranks 8 16 32 --presets ddppo --json results.jsonl
    python benchmarks/scaling.py --ranks 8 16 24 --presets a2c async-ppo impala apex ...
    python benchmarks/scaling.py --compare --json results.jsonl   # the model against them
    python benchmarks/scaling.py --plot scaling.png --json results.jsonl
    python benchmarks/scaling.py --table ib-hdr    # predicted efficiency, 8 to 1,024 GPUs

Preset layouts at N ranks: ddppo N gradient workers; a2c and async-ppo N/4 workers with 3
collector ranks each; impala N/4 workers with 1 inference rank and 2 collectors each; apex
1 learner with N - 1 collectors (one learner rank holds a replay). ``--plot`` draws
coordination per update against ranks.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from machine import machine_line
from mpi_scaling import environment, mpiexec
from rank_memory import run_sampling_ranks

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
NATURE_CNN_PARAMS = 1_687_719  # the Atari recipe's actor (Nature CNN, 6 actions)
STEPS, ENVS = 128, 8
PRESETS = ("ddppo", "a2c", "async-ppo", "impala", "apex")
# each update's own figures, kept beside the medians (an update that checkpoints costs more)
ROW_KEYS = ("updates", "env_steps", "wall_time_s", "time_collect_s", "time_wait_s",
            "time_compute_s", "time_communicate_s")
# glibc's allocator returning freed buffers of 1 MB and more (PPO's minibatches of frames)
# at once, in at most 2 arenas: a sleeping DD-PPO rank's peak 254 -> 232 MB anonymous
# (benchmarks/rank_footprint.py). Not given to the ranks: with it, 16 ranks on 4 Slurm nodes
# (srun --mpi=pmi2, MPICH 5.0.2 over UCX) failed in MPI_Init at both starts, heap bytes sent
# as a PMI-2 request; without it the same job ran (benchmarks/slurm_emulation.py).
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "1048576", "MALLOC_TRIM_THRESHOLD_": "1048576",
              "MALLOC_ARENA_MAX": "2"}
LIGHT = {"train": {"tensorboard": False, "eval_episodes": 0, "log_interval_s": 600,
                   "checkpoint_every": 2}}


def read_rows(run_dir: Path) -> list[dict[str, float]]:
    """progress.csv as floats (empty cells as nan)."""
    with open(run_dir / "progress.csv", newline="") as f:
        return [{k: float(v) if v not in ("", None) else float("nan") for k, v in row.items()}
                for row in csv.DictReader(f)]


def calibrate(run_dir: Path | None, updates: int = 3) -> dict[str, float]:
    """Seconds of one collection and of one gradient step of the real Atari PPO agent: from
    ``run_dir``'s rows after the first, or from a short serial run made here."""
    if run_dir is None:
        tmp = Path(tempfile.mkdtemp(prefix="hpcrl-calibration-"))
        run_dir = tmp / "run"
        subprocess.run([sys.executable, "-m", "hpcrl.cli", "train",
                        str(ROOT / "examples/atari-ppo.yaml"), "--run-dir", str(run_dir),
                        "--set", f"train.total_env_steps={updates * STEPS * ENVS}",
                        "--set", "train.tensorboard=false", "--set", "train.eval_episodes=0"],
                       check=True, env=environment(), stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=600)
    rows = read_rows(run_dir)[1:] or read_rows(run_dir)
    collect = statistics.median(r["time_collect_s"] for r in rows)
    compute = statistics.median(r["time_compute_s"] for r in rows)
    return {"collect_s": collect, "gradient_step_s": compute / 16, "compute_s": compute,
            "run_dir": str(run_dir)}


def layout(preset: str, ranks: int) -> dict[str, Any]:
    """The scheme and agent sections of ``preset`` at ``ranks`` ranks."""
    if preset == "ddppo":
        return {"scheme": {"preset": "ddppo", "gradient_workers": ranks},
                "algo": {"name": "emulation:SleepingPPO"}}
    workers = ranks // 4
    if preset in ("a2c", "async-ppo"):
        return {"scheme": {"preset": preset, "gradient_workers": workers,
                           "collectors_per_worker": 3},
                "algo": {"name": "emulation:SleepingPPO"}}
    if preset == "impala":
        return {"scheme": {"preset": "impala", "gradient_workers": workers,
                           "collectors_per_worker": 2, "inference_ranks": workers},
                "algo": {"name": "emulation:SleepingIMPALA", "num_steps": STEPS}}
    if preset == "apex":  # one learner rank holds the replay; every other rank collects
        return {"scheme": {"preset": "apex", "gradient_workers": 1,
                           "collectors_per_worker": ranks - 1},
                "algo": {"name": "emulation:SleepingDQN", "num_steps": STEPS},
                "replay": {"buffer_size": 4096, "learning_starts": 1024, "batch_size": 256,
                           "train_freq": STEPS, "gradient_steps": 16}}
    raise SystemExit(f"unknown preset {preset}")


def collecting_per_worker(preset: str, ranks: int = 0) -> int:
    """Collecting ranks whose rollouts one gradient worker learns from."""
    return {"ddppo": 1, "impala": 2, "apex": ranks - 1}.get(preset, 3)


def config(preset: str, ranks: int, updates: int) -> dict[str, Any]:
    """The emulated agent's whole config. Each worker keeps the recipe's 4 minibatches an
    epoch of its own samples (PPO's ``minibatch_size`` is the job's: it grows with the
    workers, as a weak-scaling run must set it)."""
    spec = layout(preset, ranks)
    # MPI's shared-memory all-reduce: gloo's TCP copies of every gradient would take the 2
    # cores from the ranks (on a cluster NCCL does that work on the GPUs)
    spec["scheme"]["allreduce"] = "mpi"
    workers = spec["scheme"]["gradient_workers"]
    k = collecting_per_worker(preset, ranks)
    algo = {"num_steps": STEPS, **spec["algo"]}
    if "SleepingPPO" in algo["name"]:
        algo["ppo"] = {"num_epochs": 4, "minibatch_size": 256 * k * workers}
    # DQN's Q-network takes no network plug-in: an MLP of 16 units on the frames
    # (452k parameters, where the Nature CNN has 1.69M) keeps the collectors' acting cheap
    actor = ({"encoder": "mlp", "hidden_sizes": [16]} if preset == "apex" else
             {"network": "emulation:BallastEncoder",
              "network_kwargs": {"params": NATURE_CNN_PARAMS}, "hidden_sizes": [16]})
    return {"env": {"id": "emulation:SleepingFrames-v0", "num_envs": ENVS}, "actor": actor,
            "algo": algo, "scheme": spec["scheme"],
            **({"replay": spec["replay"]} if "replay" in spec else {}),
            "train": {**LIGHT["train"],
                      "total_env_steps": (updates + 1) * workers * k * STEPS * ENVS}}


def gradient_step_seconds(preset: str, cal: dict[str, float]) -> float:
    """What one emulated gradient step sleeps: the calibrated step of 256 samples, times
    the samples it covers (a PPO minibatch of 256 per collecting rank, IMPALA's whole batch,
    Ape-X's replay batch of 256)."""
    k = collecting_per_worker(preset)
    if preset == "impala":
        return cal["gradient_step_s"] * k * STEPS * ENVS / 256
    if preset == "apex":
        return cal["gradient_step_s"]
    return cal["gradient_step_s"] * k


def run_job(cfg: dict[str, Any], ranks: int, sleeps: dict[str, str], timeout: float
            ) -> tuple[list[dict[str, float]], list[float], float]:
    """Run ``cfg`` on ``ranks`` ranks (killed after ``timeout`` seconds); its rows, each
    rank's peak RSS (MB) and the job's wall seconds."""
    import yaml

    tmp = Path(tempfile.mkdtemp(prefix="hpcrl-scaling-"))
    (tmp / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    cmd = ["timeout", "-s", "KILL", str(int(timeout)), mpiexec(), "-n", str(ranks),
           sys.executable, "-m", "hpcrl.cli", "train", str(tmp / "cfg.yaml"), "--run-dir",
           str(tmp / "run")]
    os.environ.update(sleeps)  # the ranks' environment (rank_memory's is this one's)
    started = time.time()
    peaks = run_sampling_ranks(cmd, ranks, interval_s=0.5)
    return read_rows(tmp / "run"), peaks, time.time() - started


def in_use_gb() -> float:
    """Memory in use on this machine (total less available), GB."""
    info = {line.split(":")[0]: int(line.split()[1])
            for line in Path("/proc/meminfo").read_text().splitlines()}
    return (info["MemTotal"] - info["MemAvailable"]) / 2**20


def per_update(rows: list[dict[str, float]], per_step: bool = False) -> dict[str, float]:
    """Median figures of the updates after the first: wall, collection, compute, and the
    coordination split (wait for rollouts, gradient exchange, the rest). With ``per_step``
    (a replay learner: its rows differ in env steps, and it trains the gradient steps due in
    bursts, rows of 2.5 s and of 53 s compute at 8 Ape-X ranks, the last row the job's end
    where it trains every step still due) the learner's figures are the sums of all rows
    after the first per env step, times the median row's steps: a median of rows, or rows
    that leave out the end, miss the bursts that hold most of its compute."""
    pairs = list(zip(rows, rows[1:], strict=False))
    walls = [b["wall_time_s"] - a["wall_time_s"] for a, b in pairs]
    later = rows[1:]
    keys = ("time_collect_s", "time_wait_s", "time_compute_s", "time_communicate_s")
    steps = statistics.median(b["env_steps"] - a["env_steps"] for a, b in pairs)
    if per_step:
        total = sum(b["env_steps"] - a["env_steps"] for a, b in pairs)
        fig = {k: sum(r[k] for r in later) / total * steps for k in keys}
        fig["time_collect_s"] = statistics.median(r["time_collect_s"] for r in later)
        wall = sum(walls) / total * steps
    else:
        fig = {k: statistics.median(r[k] for r in later) for k in keys}
        wall = statistics.median(walls)
    return {"update_s": wall, "steps": steps, "collect_s": fig["time_collect_s"],
            "wait_s": fig["time_wait_s"], "compute_s": fig["time_compute_s"],
            "communicate_s": fig["time_communicate_s"],
            "collect_times": [r["time_collect_s"] for r in later]}


def coordination(fig: dict[str, float], synchronous_own: bool) -> dict[str, float]:
    """Update time not in emulated compute, split by where it goes. A DD-PPO worker collects
    on its own path (its collection is compute); a learner fed by collectors waits instead
    (its wait holds the collectors' emulated collection, so the wait is what the learner
    measured minus the collection it waited on)."""
    if synchronous_own:
        waited = fig["wait_s"]
        base = fig["collect_s"] + fig["compute_s"]
    else:
        waited = max(fig["wait_s"] - fig["collect_s"], 0.0)
        base = min(fig["wait_s"], fig["collect_s"]) + fig["compute_s"]
    total = max(fig["update_s"] - base, 0.0)
    rest = max(total - waited - fig["communicate_s"], 0.0)
    return {"total_s": total, "wait_s": waited, "exchange_s": fig["communicate_s"],
            "rest_s": rest}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--presets", nargs="+", default=list(PRESETS), choices=PRESETS)
    parser.add_argument("--ranks", nargs="+", type=int, default=[8, 16, 32])
    parser.add_argument("--updates", type=int, default=4)
    parser.add_argument("--dilation", type=float, default=2.0,
                        help="Every sleep times this (ranks' own CPU stays a small share).")
    parser.add_argument("--calibration", type=Path, default=None,
                        help="A run directory of the real agent (else a short run here).")
    parser.add_argument("--timeout", type=float, default=600.0, help="Seconds a job may run.")
    parser.add_argument("--memory-gb", type=float, default=14.0,
                        help="Skip a job that would take the machine past this in use.")
    parser.add_argument("--json", type=Path, default=None, help="Append results here.")
    parser.add_argument("--table", default=None, metavar="NETWORK",
                        help="Print the predicted efficiency tables over NETWORK and stop.")
    parser.add_argument("--compare", action="store_true",
                        help="Compare the model with the runs of --json and stop.")
    parser.add_argument("--plot", type=Path, default=None,
                        help="Draw coordination per update against ranks from --json.")
    args = parser.parse_args()
    print(machine_line())
    if args.table is not None:
        print(ddppo_sensitivity() + "\n")
        print(prediction_tables(args.table))
        return
    if args.plot is not None:
        plot(args.json, args.plot)
        return
    if args.compare:
        compare(args.json)
        return
    cal = calibrate(args.calibration)
    print(f"calibration (real Atari PPO here): collection {cal['collect_s']:.3f} s, "
          f"gradient step {cal['gradient_step_s'] * 1e3:.1f} ms")
    for preset in args.presets:
        sleeps = {"HPCRL_EMU_STEP_S": f"{args.dilation * cal['collect_s'] / (STEPS * ENVS):.6f}",
                  "HPCRL_EMU_LOSS_S": f"{args.dilation * gradient_step_seconds(preset, cal):.6f}",
                  "OMP_NUM_THREADS": "1"}
        per_rank_mb = 0.0  # the mean RSS of a rank in this preset's last job
        for ranks in args.ranks:
            need = ranks * per_rank_mb / 1024
            if per_rank_mb and in_use_gb() + need > args.memory_gb:
                print(f"{preset:>9} {ranks:>3} ranks: skipped, {ranks} ranks of "
                      f"{per_rank_mb:.0f} MB would take the machine past "
                      f"{args.memory_gb:.0f} GB in use ({in_use_gb():.1f} GB now)", flush=True)
                continue
            rows, rss, wall = run_job(config(preset, ranks, args.updates), ranks, sleeps,
                                      args.timeout)
            per_rank_mb = sum(rss) / ranks
            fig = per_update(rows, per_step=preset == "apex")
            coord = coordination(fig, preset == "ddppo")
            record = {"preset": preset, "ranks": ranks, "dilation": args.dilation,
                      "calibration": cal, "figures": fig, "coordination": coord,
                      "rows": [{k: r.get(k) for k in ROW_KEYS} for r in rows],
                      "rss_mb": rss, "job_s": wall, "machine": machine_line(),
                      "load": os.getloadavg()[0]}
            print_job(record)
            if args.json is not None:
                with open(args.json, "a") as f:
                    f.write(json.dumps(record) + "\n")


def print_job(record: dict[str, Any]) -> None:
    """One line of a job's figures: its update, the coordination split, memory and wall."""
    fig, coord, rss = record["figures"], record["coordination"], record["rss_mb"]
    print(f"{record['preset']:>9} {record['ranks']:>3} ranks: update {fig['update_s']:.3f} s, "
          f"collect {fig['collect_s']:.3f}, compute {fig['compute_s']:.3f}; coordination "
          f"{coord['total_s'] * 1e3:.0f} ms (wait {coord['wait_s'] * 1e3:.0f}, "
          f"exchange {coord['exchange_s'] * 1e3:.0f}, rest {coord['rest_s'] * 1e3:.0f});"
          f" RSS max {max(rss):.0f} MB, sum {sum(rss) / 1024:.2f} GB; job "
          f"{record['job_s']:.0f} s", flush=True)


def plot(results: Path | None, out: Path) -> None:
    """Coordination per update against ranks, one line per preset, from the JSON lines: all
    of it, and what is left without the gradient exchange (which two cores do for every
    rank here, and NCCL on the GPUs on a cluster)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if results is None:
        raise SystemExit("--plot needs --json with the results")
    records = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.0))
    for preset in PRESETS:
        runs = sorted((r for r in records if r["preset"] == preset), key=lambda r: r["ranks"])
        if not runs:
            continue
        ranks = [r["ranks"] for r in runs]
        axes[0].plot(ranks, [r["coordination"]["total_s"] * 1e3 for r in runs], marker="o",
                     label=preset)
        axes[1].plot(ranks, [(r["coordination"]["total_s"] - r["coordination"]["exchange_s"])
                             * 1e3 for r in runs], marker="o", label=preset)
    for ax, title in zip(axes, ("coordination per update", "... less the gradient exchange"),
                         strict=True):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("ranks")
        ax.set_ylabel("ms")
        ax.set_title(title)
        ax.grid(alpha=0.3, which="both")
    axes[0].legend()
    fig.suptitle("hpcrl jobs with emulated compute on a 2-core machine (benchmarks/scaling.py)")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


# the recipes of docs/scaling.md's predictions: (recipe, --set overrides) per preset
RECIPES = {
    "Atari (examples/atari-ppo.yaml)": {
        # 2 workers in the config, each with the recipe's 4 minibatches of 256 an epoch
        "ddppo": ("examples/atari-ppo.yaml", ["scheme.preset=ddppo",
                                              "algo.ppo.minibatch_size=512"]),
        "a2c": ("examples/atari-ppo.yaml", ["scheme.preset=a2c"]),
        "async-ppo": ("examples/atari-ppo.yaml", ["scheme.preset=async-ppo"]),
        "impala": ("examples/atari-impala.yaml", []),
        "apex": ("examples/atari-dqn.yaml", ["scheme.preset=apex"]),
    },
    "ViZDoom (examples/showcase-vizdoom.yaml)": {
        "ddppo": ("examples/showcase-vizdoom.yaml",
                  ["scheme.preset=ddppo", "scheme.collectors_per_worker=0",
                   "scheme.collection=sync"]),
        "a2c": ("examples/showcase-vizdoom.yaml",
                ["scheme.preset=a2c", "scheme.collectors_per_worker=2",
                 "scheme.collection=sync"]),
        "async-ppo (the recipe's layout)": ("examples/showcase-vizdoom.yaml", []),
    },
}


def prediction_tables(network_name: str, gpus_per_node: int = 8) -> str:
    """Markdown tables of predicted efficiency (against one GPU) at 8 to 1,024 GPUs, per
    preset and recipe, calibrated from modelled per-step costs."""
    from hpcrl.cli.model_inputs import config_inputs
    from hpcrl.cli.predict import calibration_for
    from hpcrl.config.loader import load_config
    from hpcrl.scheme.cost_model import predict
    from hpcrl.scheme.links import network
    from hpcrl.scheme.prediction import scaling_loss

    counts = (8, 16, 32, 64, 128, 256, 512, 1024)
    net = network(network_name)
    out = []
    for recipe, presets in RECIPES.items():
        out += [f"**{recipe}**, {gpus_per_node} GPUs a node, {network_name}", "",
                "| preset | " + " | ".join(str(n) for n in counts)
                + " | env steps/s at 128 | what costs most at 1,024 |",
                "|---" * (len(counts) + 3) + "|"]
        for preset, (path, sets) in presets.items():
            cfg = load_config(str(ROOT / path), sets)
            if preset.startswith("apex"):
                out.append(f"| {preset} | " + " | ".join("-" for _ in counts)
                           + " | - | one learner rank holds the replay: no GPU scaling |")
                continue
            cal = calibration_for(cfg, None)
            shape = config_inputs(cfg).shape
            figures = [predict(shape, cal, n, gpus_per_node, net) for n in counts]
            out.append(f"| {preset} | " + " | ".join(f"{p.efficiency:.2f}" for p in figures)
                       + f" | {figures[4].frames_per_s:,.0f} | {scaling_loss(figures[-1])} |")
        out.append("")
    return "\n".join(out)


def steps_per_update(preset: str, ranks: int) -> int:
    """Env steps of one update of ``preset``'s job at ``ranks`` ranks (its workers' collecting
    ranks' rollouts; Ape-X's learner ends a progress row once that many arrived)."""
    workers = ranks if preset == "ddppo" else 1 if preset == "apex" else ranks // 4
    return workers * collecting_per_worker(preset, ranks) * STEPS * ENVS


def later_rows(run: dict[str, Any]) -> list[tuple[float, float, bool]]:
    """``(wall s, env steps, after a checkpoint)`` of each update after the first but the last
    (none for a record without rows). A checkpoint taken at the end of update u falls in
    update u + 1. The last is the job's end: an Ape-X learner there takes every chunk still
    arriving and trains every gradient step due (152 s of 156 at 16 ranks), no update's."""
    rows, every = (run.get("rows") or [])[:-1], LIGHT["train"]["checkpoint_every"]
    return [(b["wall_time_s"] - a["wall_time_s"], b["env_steps"] - a["env_steps"],
             (int(b["updates"]) - 1) % every == 0) for a, b in zip(rows, rows[1:],
                                                                   strict=False)]


def measured_update(preset: str, run: dict[str, Any]) -> float:
    """Seconds of one update of ``run``: the later rows' wall per env step times an update's
    steps (checkpoint rows in, as often as the job takes them), else the median row's,
    scaled to an update's steps; Ape-X's over all rows after the first, its end in (see
    :func:`per_update`)."""
    rows = later_rows(run)
    per_update = steps_per_update(preset, run["ranks"])
    if rows and preset != "apex":
        return sum(w for w, _, _ in rows) / sum(n for _, n, _ in rows) * per_update
    return run["figures"]["update_s"] * per_update / max(run["figures"]["steps"], 1.0)


def state_seconds(preset: str, run: dict[str, Any]) -> float:
    """Seconds a checkpoint costs per rank, from ``run``'s rows: what a row after a
    checkpoint took beyond the others (per env step, times an update's steps), over the
    ranks whose states rank 0 gathered; 0 without rows of both kinds."""
    rows = later_rows(run)
    after = [w / n for w, n, c in rows if c]
    others = [w / n for w, n, c in rows if not c]
    if not after or not others:
        return 0.0
    extra = statistics.mean(after) - statistics.mean(others)
    return max(extra, 0.0) * steps_per_update(preset, run["ranks"]) / run["ranks"]


def model_of_run(preset: str, ranks: int, base: dict[str, Any],
                 own: dict[str, Any] | None = None) -> float:
    """The cost model's update time for ``preset`` on ``ranks`` ranks of this host, calibrated
    on the ``base`` record (the preset's smallest run): its collection and compute times and
    their spread as measured (``own``'s, the run being predicted, where given: its emulated
    compute as the loaded host stretched it), a host link fitted to its all-reduce time, its
    learner's time per collector and its checkpoints' cost per rank. Two cores do every
    rank's share of an all-reduce here, so the host's bus bandwidth is taken to fall as
    1 / gradient workers (a cluster gives each GPU its own link). Times of a row are scaled
    to an update's env steps (an Ape-X row may hold more)."""
    from hpcrl.scheme.calibration import DEFAULT_CV, collection_spread
    from hpcrl.scheme.cost_model import Calibration, Shape, predict

    fig, timed = base["figures"], (own or base)["figures"]
    k = 0 if preset == "ddppo" else collecting_per_worker(preset, ranks)
    w0, w = _workers(preset, base["ranks"]), _workers(preset, ranks)
    collecting = w0 * max(collecting_per_worker(preset, base["ranks"]), 1)
    cv = collection_spread(fig.get("collect_times", []), collecting) or DEFAULT_CV
    steps = {"ddppo": 16, "a2c": 16, "async-ppo": 16, "impala": 1, "apex": 16}[preset]
    shape = Shape(collectors_per_worker=k, asynchronous=preset in ("async-ppo", "impala",
                                                                  "apex"),
                  inference_per_worker=1 if preset == "impala" else 0,
                  fraction_workers=0.6 if preset == "ddppo" else 1.0,
                  fraction_samples=0.25 if preset == "ddppo" else 1.0)
    # a row's learner times, scaled to one update's env steps; a replay learner's (one
    # learner, k collectors) to the predicted run's: it trains gradient steps per env step
    # taken in (replay.gradient_steps a train_freq), so its compute grows with its collectors
    learned = ranks if preset == "apex" else (own or base)["ranks"]
    scale = steps_per_update(preset, learned) / max(timed["steps"], 1.0)
    # an asynchronous learner here waits for part of a collection (the policy-lag bound
    # drops rollouts older than max_policy_lag): that wait, as measured, stays in
    wait = timed["wait_s"] * scale if shape.asynchronous else 0.0
    cal = Calibration(STEPS * ENVS, timed["collect_s"], cv, timed["compute_s"] * scale + wait,
                      4.0 * NATURE_CNN_PARAMS, steps,
                      rollout_bytes=STEPS * ENVS * 4 * 84 * 84)
    return predict(shape, cal, w, 10**6, _host_link(fig, w0, w, steps),
                   _overheads(preset, base)).update_s


def _workers(preset: str, ranks: int) -> int:
    return ranks if preset == "ddppo" else 1 if preset == "apex" else ranks // 4


def _host_link(fig: dict[str, Any], w0: int, w: int, steps: int) -> Any:
    """This host's all-reduce as a link: its bus bandwidth at the base run, from the measured
    exchange (2(p-1)/p of each gradient), falling as 1 / workers."""
    from hpcrl.scheme.links import Network

    per_step = fig["communicate_s"] / steps
    grad = 4.0 * NATURE_CNN_PARAMS
    busbw0 = (2 * (w0 - 1) / w0 * grad / per_step) if w0 > 1 and per_step > 0 else 1e12
    busbw = busbw0 * w0 / max(w, 1)
    return Network("host", busbw, 0.0, busbw, 1, 0.0, "this 2-core host")


def _overheads(preset: str, base: dict[str, Any]) -> Any:
    """What the base run's learner spent beside compute, exchange, waits and checkpoints,
    per collector it serves (rollouts in, weights out, a replay's inserts) and per update's
    env steps; and its checkpoints' cost per rank, every ``checkpoint_every`` updates."""
    from hpcrl.scheme.cost_model import Overheads

    k0 = 0 if preset == "ddppo" else collecting_per_worker(preset, base["ranks"])
    every = LIGHT["train"]["checkpoint_every"]
    state_s = state_seconds(preset, base)
    scale = steps_per_update(preset, base["ranks"]) / max(base["figures"]["steps"], 1.0)
    rest = base["coordination"]["rest_s"] * scale
    if state_s:  # the rows' medians hold checkpoints as often as not: counted apart
        rest = max(rest - base["ranks"] * state_s / every / 2, 0.0)
    if _workers(preset, base["ranks"]) == 1:  # no all-reduce: its exchange was collectors'
        rest += base["coordination"]["exchange_s"] * scale
    return Overheads(per_collector_s=rest / k0 if k0 else 0.0, local_bandwidth=1e15,
                     report_s=0.0 if k0 else rest, state_s=state_s,
                     checkpoint_every=every if state_s else 0)


def with_figures_of_rows(preset: str, run: dict[str, Any]) -> dict[str, Any]:
    """``run`` with its figures and coordination taken again from its rows (the last row
    left out, as :func:`per_update` now does), where the record kept its rows."""
    rows = run.get("rows") or []
    if len(rows) < 3:
        return run
    fig = per_update([{k: float("nan") if v is None else v for k, v in r.items()}
                      for r in rows], per_step=preset == "apex")
    return {**run, "figures": fig, "coordination": coordination(fig, preset == "ddppo")}


def compare(results: Path) -> None:
    """Measured update time against the model's, per preset and rank count."""
    records = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    print("| preset | ranks | measured update | model from the smallest run | error | "
          "model, compute as timed in the run | error |")
    print("|---|---|---|---|---|---|---|")
    for preset in PRESETS:
        runs = sorted((with_figures_of_rows(preset, r) for r in records
                       if r["preset"] == preset), key=lambda r: r["ranks"])
        for run in runs:
            measured = measured_update(preset, run)
            base = model_of_run(preset, run["ranks"], runs[0])
            own = model_of_run(preset, run["ranks"], runs[0], run)
            print(f"| {preset} | {run['ranks']} | {measured:.2f} s | {base:.2f} s | "
                  f"{(base - measured) / measured:+.1%} | {own:.2f} s | "
                  f"{(own - measured) / measured:+.1%} |")


def ddppo_sensitivity() -> str:
    """The model's efficiency at 128 GPUs fed DD-PPO's setup (tests/scheme/test_cost_model.py
    holds the same inputs) against the one input its paper does not give, the spread."""
    from dataclasses import replace

    from hpcrl.scheme.cost_model import Calibration, Shape, predict
    from hpcrl.scheme.links import NETWORKS, allreduce_seconds

    paper = Calibration(512, 2.4, 0.45, 0.8, 4 * 12.5e6, 4)
    net = NETWORKS["ib-edr"]
    spreads = (0.1, 0.2, 0.3, 0.4, 0.45, 0.5)
    rows = []
    for name, shape in (("preemption at 60 %", Shape(fraction_workers=0.6,
                                                      fraction_samples=0.25)),
                        ("no preemption", Shape())):
        rows.append(f"| efficiency at 128, {name} | " + " | ".join(
            f"{predict(shape, replace(paper, collect_cv=cv), 128, 8, net).efficiency:.3f}"
            for cv in spreads) + " |")
    allreduce = 4 * allreduce_seconds(paper.grad_bytes, 128, 8, net)
    return "\n".join(["| cv | " + " | ".join(map(str, spreads)) + " |",
                      "|---" * (len(spreads) + 1) + "|", *rows, "",
                      f"all-reduces an update at 128 GPUs: {allreduce * 1e3:.1f} ms"])


if __name__ == "__main__":
    main()
