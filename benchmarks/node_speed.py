"""Node speed: hpcrl's layouts and Sample Factory 2.1.1 on one node, side by side, in one table.

Per scenario, every job trains for ``--seconds`` of wall-clock from its launch, one after the
other, with the same scenario, screen, frame skip, network, env count and budget:

* **pong**: Atari Pong on EnvPool, the Nature CNN of ``examples/atari-ppo.yaml``; Sample
  Factory's ``sf_examples.atari.train_atari``;
* **doom-sf**: ViZDoom Basic with Sample Factory's own ViZDoom agent (its simple convnet, a
  GRU of 512, frame skip 4, 128x72 screens), hpcrl set as close as its keys allow (the
  Nature CNN stands in for the simple convnet);
* **doom-showcase**: the showcase agent (``examples/showcase-vizdoom.yaml``: IMPALA ResNet
  with Fixup, GRU 256, frame skip 2) on ViZDoom Basic; Sample Factory with the same network
  (its ``resnet_impala``).

hpcrl runs as one process, as ``a2c`` (one learner, ``--collectors`` synchronous collector
ranks) and as ``async-ppo`` with inference ranks (one per ``--per-inference`` collectors, on
the learner's device: the GPU node's layout); Sample Factory at its own defaults for sampling
(double-buffered: ``--worker_num_splits=2``, its policy worker batching the workers' requests),
``--collectors`` rollout workers. Columns: frames/s and agent steps/s (after start-up), the
GPU's busy share (``nvidia-smi``, sampled while training), the learner's waiting share and
each role's time split per update (progress.csv's ``time_*`` columns), and the job's peak
resident memory (every process summed).

Then the micro-figures of ``node_speed_micro.py`` (2 ranks): an acting round trip through
messages and through shared slots, the gain of ``scheme.env_groups=2`` where stepping and
acting cost the same, and the copies per rollout; each against its goal.

    python benchmarks/node_speed.py --device cuda --sf-python SF/bin/python   # a GPU node
    python benchmarks/node_speed.py --device cpu --quick                      # this machine, CI

Sample Factory needs gymnasium < 1.0 and numpy < 2, so it runs from a virtual environment of
its own (``--sf-python``); without one its rows are left out. On a machine with no network,
build its wheels where there is one (``pip download -d wheels sample-factory==2.1.1
'gymnasium<1.0' 'numpy<2' vizdoom==1.2.4 'ale-py==0.9.0' faster-fifo signal-slot-mp colorlog
tensorboardx``) and pass ``--sf-wheels wheels``: the script installs them with ``pip install
--no-index --target`` beside this interpreter's torch (docs/benchmarks.md: Node speed).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from machine import machine_line
from mpi_scaling import descendants, environment, mpiexec, progress_rows, steps_per_second
from node_throughput import SF_LAUNCHER, SF_STATUS
from soak import rss_bytes
from vizdoom_vs_sample_factory import (
    as_args,
    has_row,
    plan,
    resolved_config,
    run_for,
    sample_factory_flags,
    tail,
)

ROOT = Path(__file__).resolve().parents[1]
EXIT_STOPPED = 3
GOALS = {"env_groups": 1.6, "shared_share": 1 / 3, "copies": 1.0}


@dataclass
class Scenario:
    """A scenario on both sides: hpcrl's recipe and keys, Sample Factory's module and env."""

    recipe: str
    sets: list[str]
    frame_skip: int
    sf_module: str
    sf_env: str
    sf_flags: list[str] = field(default_factory=list)


SCENARIOS = {
    "pong": Scenario("atari-ppo.yaml", ["env.id=PongNoFrameskip-v4", "env.backend=envpool"],
                     4, "atari", "atari_pong"),
    "doom-sf": Scenario("showcase-vizdoom.yaml",
                        ["env.id=VizdoomBasic-v1", "env.vizdoom.frame_skip=4",
                         "env.vizdoom.frame_stack=1", "actor.encoder=nature_cnn",
                         "actor.encoder_init=default", "actor.features=512",
                         "actor.memory_size=512", "algo.num_steps=32", "algo.lr=1e-4",
                         "algo.ppo.num_epochs=1", "algo.ppo.clip_range=0.1"],
                        4, "vizdoom", "doom_basic"),
    "doom-showcase": Scenario("showcase-vizdoom.yaml", ["env.id=VizdoomBasic-v1"], 2,
                              "vizdoom", "doom_basic"),
}


@dataclass
class Row:
    """One job's figures."""

    scenario: str
    system: str
    layout: str
    ranks: int = 0
    frames_per_s: float = math.nan
    agent_steps_per_s: float = math.nan
    gpu_busy: float = math.nan
    learner_wait: float = math.nan
    split: str = "-"
    peak_gb: float = math.nan
    note: str = ""


class Sampler:
    """Peak memory of a job's process tree and the GPU's busy share, sampled at each poll."""

    def __init__(self, gpu: bool) -> None:
        self.gpu, self.peak, self.busy = gpu, 0, []  # type: ignore[var-annotated]
        self._thread: threading.Thread | None = None

    def __call__(self, pid: int) -> None:
        try:
            tree = [pid, *descendants(pid)]
        except OSError:
            return
        self.peak = max(self.peak, sum(rss_bytes(p) for p in tree))
        if self.gpu and (self._thread is None or not self._thread.is_alive()):
            self._thread = threading.Thread(target=self._read_gpu, daemon=True)
            self._thread.start()

    def _read_gpu(self) -> None:
        done = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu",
                               "--format=csv,noheader,nounits"], capture_output=True, text=True)
        if done.returncode == 0 and done.stdout.strip():
            self.busy.append(float(done.stdout.split()[0]))

    def fill(self, row: Row) -> None:
        """The sampled figures into ``row``."""
        row.peak_gb = self.peak / 2**30
        if self.busy:
            row.gpu_busy = sum(self.busy) / len(self.busy)


# --- hpcrl ---------------------------------------------------------------------------------

def layouts(args: argparse.Namespace) -> dict[str, list[str]]:
    """hpcrl's layouts of this node: one process, ``a2c`` with ``--collectors`` collectors,
    ``async-ppo`` with an inference rank per ``--per-inference`` collectors."""
    k = args.collectors
    one = ["scheme.gradient_workers=1", "scheme.collectors_per_worker=0",
           "scheme.collection=sync"]
    sync = ["scheme.preset=a2c", "scheme.gradient_workers=1",
            f"scheme.collectors_per_worker={k}"]
    inference = max(1, k // args.per_inference)
    while k % inference:
        inference -= 1
    remote = ["scheme.preset=async-ppo", "scheme.gradient_workers=1",
              f"scheme.collectors_per_worker={k}", f"scheme.inference_ranks={inference}",
              f"scheme.inference_device={args.device}"]
    return {"one process": one, f"a2c 1+{k}": sync,
            f"async-ppo 1+{inference} inference+{k}": remote}


def hpcrl_row(name: str, scenario: Scenario, layout: str, sets: list[str],
              args: argparse.Namespace) -> Row:
    """One hpcrl job of ``layout``, trained for ``args.seconds``."""
    recipe = ROOT / "examples" / scenario.recipe
    sets = [*scenario.sets, *sets, f"train.device={args.device}", "train.eval_episodes=0",
            "train.tensorboard=false", "train.total_env_steps=1000000000",
            "train.log_interval_s=60", *args.set]
    sets.append(f"algo.ppo.minibatch_size={minibatch(resolved_config(recipe, sets), sets)}")
    ranks = int(plan(recipe, sets)["world_size"])
    row = Row(name, "hpcrl", layout, ranks)
    sampler = Sampler(args.device.startswith("cuda"))
    with tempfile.TemporaryDirectory() as tmp:
        run, log = Path(tmp) / "run", Path(tmp) / "log.txt"
        cmd = [mpiexec(), "-n", str(ranks), sys.executable, "-m", "hpcrl.cli", "train",
               str(recipe), "--run-dir", str(run), *as_args(sets)]
        code, _, _ = run_for(cmd, args.seconds, log, signal.SIGUSR1, to_group=False,
                             env=environment(), grace_s=120.0, tick=sampler)
        sampler.fill(row)
        if not has_row(run / "progress.csv"):
            # stopped by the budget's SIGUSR1 before its first update (still starting, its
            # handler not yet installed: the launcher reports the signal) is no failure
            stopped = code in (0, EXIT_STOPPED, int(signal.SIGUSR1), -int(signal.SIGUSR1))
            row.note = ("no update within the budget" if stopped else
                        f"failed ({code}): {tail(log, 300)!r}")
            return row
        rows = progress_rows(run)
    skip = scenario.frame_skip
    row.agent_steps_per_s = (steps_per_second(rows) if len(rows) > 1 else
                             float(rows[0]["env_steps"]) / float(rows[0]["wall_time_s"]))
    row.frames_per_s = row.agent_steps_per_s * skip
    later = rows[1:] or rows

    def mean(column: str) -> float:
        return sum(float(r[column]) for r in later) / len(later)

    times = {k: mean(f"time_{k}_s") for k in ("collect", "wait", "compute", "communicate")}
    busy = times["wait"] + times["compute"] + times["communicate"]
    row.learner_wait = times["wait"] / busy if busy > 0 else math.nan
    row.split = "/".join(f"{times[k]:.2f}" for k in ("collect", "wait", "compute",
                                                     "communicate"))
    return row


def minibatch(config: dict[str, Any], sets: list[str]) -> int:
    """The minibatch that cuts a layout's batch (a rollout of every collecting rank) into as
    many minibatches as the recipe's one-process batch has, a multiple of an update's envs
    that divides the batch."""
    algo, envs = config["algo"], int(config["env"]["num_envs"])
    steps = int(algo["num_steps"])
    count = max(1, steps * envs // int(algo["ppo"]["minibatch_size"]))
    collectors = next((int(s.split("=")[1]) for s in reversed(sets)
                       if s.startswith("scheme.collectors_per_worker=")), 0)
    update_envs = envs * max(collectors, 1)
    batch = steps * update_envs
    size = max(update_envs, batch // count // update_envs * update_envs)
    while batch % size:
        size += update_envs
    return size


# --- Sample Factory ------------------------------------------------------------------------

def sf_row(name: str, scenario: Scenario, args: argparse.Namespace) -> Row:
    """Sample Factory's APPO at its sampling defaults for ``args.seconds``."""
    recipe = ROOT / "examples" / scenario.recipe
    config = resolved_config(recipe, [*scenario.sets, *args.set])
    envs = int(config["env"]["num_envs"])
    row = Row(name, "sample-factory", f"APPO {args.collectors} workers",
              args.collectors + 2)
    sampler = Sampler(args.device.startswith("cuda"))
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "log.txt"
        if scenario.sf_module == "atari":
            launcher = Path(tmp) / "train_atari.py"
            launcher.write_text(SF_LAUNCHER)
            algo = config["algo"]
            rollout, batch = int(algo["num_steps"]), int(algo["ppo"]["minibatch_size"])
            # APPO with the recipe's rollout, minibatch and epochs (its Atari example's own
            # default is synchronous PPO, which refuses this batch); sampling at its defaults
            cmd = [args.sf_python, str(launcher), f"--env={scenario.sf_env}", "--algo=APPO",
                   "--async_rl=True", f"--num_workers={args.collectors}",
                   f"--num_envs_per_worker={envs}", f"--rollout={rollout}",
                   f"--batch_size={batch}",
                   f"--num_batches_per_epoch={max(1, rollout * envs // batch)}",
                   f"--num_epochs={int(algo['ppo']['num_epochs'])}"]
        else:
            flags = sample_factory_flags(config, envs * args.collectors, 1, args.collectors,
                                         scenario.frame_skip)
            keep = [f for f in flags if not f.startswith(("--worker_num_splits", "--device"))]
            cmd = [args.sf_python, "-m", "sf_examples.vizdoom.train_vizdoom",
                   f"--env={scenario.sf_env}", *keep]
        cmd += [f"--device={'gpu' if args.device.startswith('cuda') else 'cpu'}",
                "--experiment=run", f"--train_dir={tmp}", "--with_wandb=False",
                "--save_every_sec=100000", *scenario.sf_flags]
        launched = datetime.now().timestamp()
        code, _, _ = run_for(cmd, args.seconds, log, signal.SIGINT, to_group=True,
                             env=sf_environment(args), cwd=Path(tmp), grace_s=15.0,
                             tick=sampler)
        sampler.fill(row)
        text = log.read_text(errors="replace")
    status = [(datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp(),
               int(m.group(2))) for m in SF_STATUS.finditer(text)]
    moving = [(t, f) for t, f in status if f > 0 and t - launched <= args.seconds]
    if len(moving) > 2:
        (t0, f0), (t1, f1) = moving[1], moving[-1]
        row.frames_per_s = (f1 - f0) / (t1 - t0)
        row.agent_steps_per_s = row.frames_per_s / scenario.frame_skip
    else:
        row.note = f"no rate ({code}): {text[-300:]!r}"
    return row


def sf_environment(args: argparse.Namespace) -> dict[str, str]:
    """The environment of Sample Factory's jobs (its wheels' target directory first)."""
    env = environment()
    if args.sf_target:
        env["PYTHONPATH"] = os.pathsep.join([args.sf_target, env.get("PYTHONPATH", "")])
    return env


def install_wheels(wheels: str, target: str) -> None:
    """Sample Factory and its needs from a folder of wheels (a machine with no network)."""
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index",
                    "--find-links", wheels, "--target", target, "sample-factory==2.1.1",
                    "gymnasium<1.0", "numpy<2"], check=True)


# --- micro-figures, the table ----------------------------------------------------------------

def micro(args: argparse.Namespace) -> dict[str, Any]:
    """The figures of node_speed_micro.py on 2 ranks."""
    cmd = [mpiexec(), "-n", "2", sys.executable, str(Path(__file__).with_name(
        "node_speed_micro.py")), "--seconds", str(args.micro_seconds)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=environment(), timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"node_speed_micro.py failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def print_table(rows: list[Row]) -> None:
    """The scenario table, and hpcrl's best layout against Sample Factory per scenario."""
    print(f"{'scenario':<14} {'system':<15} {'layout':<30} {'ranks':>5} {'frames/s':>9} "
          f"{'steps/s':>8} {'GPU %':>6} {'wait %':>7} {'collect/wait/compute/comm s':>28} "
          f"{'peak GB':>7}")
    for r in rows:
        print(f"{r.scenario:<14} {r.system:<15} {r.layout:<30} {r.ranks:>5} "
              f"{r.frames_per_s:9.0f} {r.agent_steps_per_s:8.0f} {r.gpu_busy:6.0f} "
              f"{100 * r.learner_wait:7.1f} {r.split:>28} {r.peak_gb:7.2f}"
              + (f"  ({r.note})" if r.note else ""))
    for scenario in dict.fromkeys(r.scenario for r in rows):
        ours = [r for r in rows if r.scenario == scenario and r.system == "hpcrl"
                and not math.isnan(r.frames_per_s)]
        theirs = [r for r in rows if r.scenario == scenario and r.system != "hpcrl"
                  and not math.isnan(r.frames_per_s)]
        if ours and theirs:
            best = max(ours, key=lambda r: r.frames_per_s)
            ratio = best.frames_per_s / theirs[0].frames_per_s
            print(f"{scenario}: hpcrl's best ({best.layout}) / Sample Factory = {ratio:.2f}x "
                  f"(goal >= 1)")


def print_micro(figures: dict[str, Any]) -> None:
    """The micro-figures against their goals."""
    share = figures["shared_us"] / figures["messages_us"]
    gain = figures["groups_2"] / figures["groups_1"]
    copies = max(figures["copies"].values())
    print(f"acting round trip (8 Atari frame stacks): messages {figures['messages_us']:.1f} "
          f"us, shared slots {figures['shared_us']:.1f} us = {share:.2f} of it "
          f"(goal <= {GOALS['shared_share']:.2f})")
    print(f"env_groups (stepping and acting {figures['cost_us']:.0f} us each per vector "
          f"step): 1 group {figures['groups_1']:.0f} env steps/s, 2 groups "
          f"{figures['groups_2']:.0f} = {gain:.2f}x (goal >= {GOALS['env_groups']})")
    print(f"copies per rollout before the first minibatch on this CPU: GAE "
          f"{figures['copies']['gae']:.2f}, V-trace {figures['copies']['vtrace']:.2f} "
          f"(goal <= {GOALS['copies']:.0f}; a GPU learner's is its one copy to the device)")
    print(json.dumps({"micro": figures}))
    print(f"goals: {'met' if gain >= GOALS['env_groups'] and share <= GOALS['shared_share'] and copies <= GOALS['copies'] else 'NOT all met'}")  # noqa: E501


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="cpu or cuda (the learner's and the "
                        "inference ranks')")
    parser.add_argument("--scenarios", nargs="+", default=list(SCENARIOS),
                        choices=list(SCENARIOS))
    parser.add_argument("--seconds", type=float, default=None,
                        help="wall-clock per job (default 40; 10 with "
                        "--quick)")
    parser.add_argument("--collectors", type=int, default=None,
                        help="collector ranks / Sample Factory workers (default: the CPUs "
                        "this process may use, less 3; 2 here)")
    parser.add_argument("--per-inference", type=int, default=6,
                        help="collectors per inference rank")
    parser.add_argument("--sf-python", help="the python of Sample Factory's environment")
    parser.add_argument("--sf-wheels", help="a folder of wheels to install Sample Factory from")
    parser.add_argument("--quick", action="store_true",
                        help="short rollouts and budgets: the CPU form CI runs")
    parser.add_argument("--strict", action="store_true",
                        help="exit 1 when an hpcrl job failed (CI; one the budget stopped "
                        "before its first update is reported, not failed)")
    parser.add_argument("--skip-micro", action="store_true")
    parser.add_argument("--micro-seconds", type=float, default=6.0)
    parser.add_argument("--set", action="append", default=[], help="KEY=VALUE for every job")
    args = parser.parse_args()
    gpu = args.device.startswith("cuda")
    cpus = len(os.sched_getaffinity(0))
    args.collectors = args.collectors or (max(2, cpus - 3) if gpu else 2)
    args.seconds = args.seconds or (40.0 if gpu else 10.0 if args.quick else 40.0)
    args.sf_target = None
    if args.sf_wheels:
        args.sf_target = str(Path(tempfile.mkdtemp()) / "sf")
        install_wheels(args.sf_wheels, args.sf_target)
        args.sf_python = args.sf_python or sys.executable
    if args.quick:
        args.set = ["algo.num_steps=16", "env.num_envs=4", *args.set]
        args.micro_seconds = min(args.micro_seconds, 3.0)
    print(machine_line(), flush=True)
    if gpu:
        name = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                              capture_output=True, text=True).stdout.strip()
        print(f"GPU: {name}", flush=True)
    rows = []
    for name in args.scenarios:
        scenario = SCENARIOS[name]
        for layout, sets in layouts(args).items():
            rows.append(hpcrl_row(name, scenario, layout, sets, args))
            print(f"... {name} {layout}: {rows[-1].frames_per_s:.0f} frames/s", flush=True)
        if args.sf_python:
            rows.append(sf_row(name, scenario, args))
            print(f"... {name} Sample Factory: {rows[-1].frames_per_s:.0f} frames/s",
                  flush=True)
    print_table(rows)
    if not args.skip_micro:
        print_micro(micro(args))
    failed = [f"{r.scenario} {r.layout}" for r in rows
              if r.system == "hpcrl" and r.note.startswith("failed")]
    if args.strict and failed:
        raise SystemExit(f"hpcrl jobs that failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
