"""Soak: does any rank's memory grow with the env steps it has taken?

Runs each preset as a user would (`mpiexec -n N hpcrl train --set scheme.preset=P`, with the
rank count `hpcrl plan` gives; serial as plain `hpcrl train`) for ``--seconds`` each, and
every ``--interval`` seconds samples each rank's resident memory (``VmRSS`` of the rank
processes under mpiexec) and the job's env steps (the last ``progress.csv`` row). Per rank
it prints the RSS growth per million env steps of the job, the slope of a least-squares line
over the samples after the first 30% of the run (start-up and allocator warm-up excluded;
a run too short to leave warm-up shows its tail as growth: soak long enough for millions of
steps before reading the figure against the target).
Target: under 0.1 MB per million steps on every rank. RSS moves by pages and allocator
chunks, so each figure comes with its resolution: the spread of the samples about the fitted
line (max minus min residual) over the env steps the fit spans; a slope within that band of
the target cannot be told from it. A rank is "flat" when slope + resolution is under the
target, "GROWS" when slope - resolution is over it both over the whole fit and over its late
half (warm-up that levels off is not a leak), and "not resolved" otherwise (soak longer).

A replay learner's replay is preallocated with ``np.zeros``: its pages become resident as
transitions are written, so a still-filling replay grows RSS by the bytes it holds. The
learner's figure subtracts those bytes (filled transitions times the replay's bytes per
transition, measured from the replay the config builds), and the table gives the fill at
the end, so a filling replay is not mistaken for a leak.

The discrete presets train on CartPole-v1, async-sac on Pendulum-v1 (TensorBoard and the
final evaluation off; `--set KEY=VALUE` adds overrides to every preset). ``--light`` makes
every update cheaper while keeping the updates and messages per env step, so that a soak of
minutes reaches millions of steps on a small machine: one PPO epoch per update, and the
replay learners on a [32, 32] net with batches of 32 and a 50k replay (full after warm-up).

    python benchmarks/soak.py                         # every preset, 180 s each
    python benchmarks/soak.py --presets async-ppo --seconds 600
    python benchmarks/soak.py --light --seconds 240   # the table of docs/benchmarks.md
    python benchmarks/soak.py --light --presets apex --seconds 2400 --samples apex.csv
"""
from __future__ import annotations

import argparse
import csv
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from machine import machine_line
from mpi_scaling import LIGHT, environment, mpiexec, python_ranks

PRESETS = {"serial": "CartPole-v1", "a2c": "CartPole-v1", "ddppo": "CartPole-v1",
           "a3c": "CartPole-v1", "async-ppo": "CartPole-v1", "impala": "CartPole-v1",
           "apex": "CartPole-v1", "async-sac": "Pendulum-v1"}
TARGET_MB_PER_M = 0.1
WARMUP_FRACTION = 0.3
NEVER_ENDS = 10**12  # total_env_steps: the soak, not the budget, ends the run
REPLAY_LIGHT = ["actor.hidden_sizes=[32,32]", "replay.batch_size=32", "replay.buffer_size=50000"]
LIGHT_SETS = {"apex": REPLAY_LIGHT, "async-sac": REPLAY_LIGHT,  # --light; impala takes
              "impala": []}  # one step per rollout already; the PPO presets:
ON_POLICY_LIGHT = ["algo.ppo.num_epochs=1"]


@dataclass
class Soak:
    """The samples of one preset's run: (seconds, job env steps, RSS bytes per rank)."""

    preset: str
    roles: list[str]
    replay_bytes_per_step: float = 0.0  # resident bytes a transition adds to the replay
    replay_capacity: int = 0
    learner: int = 0  # the rank that holds the replay
    samples: list[tuple[float, int, list[int]]] = field(default_factory=list)

    def replay_resident(self, steps: int) -> float:
        return min(steps, self.replay_capacity) * self.replay_bytes_per_step

    def growth(self, rank: int, late: bool = False) -> tuple[float, float] | None:
        """MB per million env steps after warm-up (least squares) and its resolution (the
        residuals' range over the steps spanned, in the same unit); None with too few
        samples. ``late``: over the second half of those samples only (is it levelling
        off?). The learner's replay bytes are taken out first."""
        rows = [s for s in self.samples if s[1] > 0 and s[2][rank] > 0]
        rows = rows[int(len(rows) * WARMUP_FRACTION):]
        if late:
            rows = rows[len(rows) // 2:]
        if len(rows) < 3 or rows[-1][1] == rows[0][1]:
            return None
        steps = np.array([r[1] for r in rows], np.float64)
        rss = np.array([r[2][rank] for r in rows], np.float64)
        if rank == self.learner:
            rss -= np.array([self.replay_resident(int(s)) for s in steps])
        slope, intercept = np.polyfit(steps, rss, 1)  # bytes per env step
        residuals = rss - (slope * steps + intercept)
        band = float(residuals.max() - residuals.min())
        per_million = 1e6 / 2**20
        return slope * per_million, band / (steps[-1] - steps[0]) * per_million

    def verdict(self, rank: int) -> str:
        """'flat', 'GROWS' or 'not resolved': the slope against the target, given how finely
        the run resolves it; growth that the late half no longer shows is warm-up
        levelling off, not resolved either way."""
        whole, late = self.growth(rank), self.growth(rank, late=True)
        if whole is None:
            return ""
        if whole[0] + whole[1] < TARGET_MB_PER_M:
            return "flat"
        if late is not None and min(whole[0] - whole[1], late[0] - late[1]) > TARGET_MB_PER_M:
            return "GROWS"
        return "not resolved (soak longer)"


def sets_for(preset: str, extra: list[str], light: bool = False) -> list[str]:
    """The overrides one preset's soak trains with (``light``: see the module's doc)."""
    lighter = LIGHT_SETS.get(preset, ON_POLICY_LIGHT) if light else []
    return LIGHT[:2] + [f"scheme.preset={preset}", f"env.id={PRESETS[preset]}",
                        f"train.total_env_steps={NEVER_ENDS}", *lighter, *extra]


def describe(preset: str, sets: list[str]) -> Soak:
    """Roles per rank (as `hpcrl plan` lays them out) and the replay's bytes per step."""
    from hpcrl.algorithms import algorithm_capabilities
    from hpcrl.build import env_spaces
    from hpcrl.config.loader import load_config
    from hpcrl.scheme.plan import plan_json

    config = load_config(None, sets)
    plan = plan_json(config)
    soak = Soak(preset, [r["role"] for r in plan["ranks"]])
    if algorithm_capabilities(config.algo.name).replay:
        from hpcrl.learning.replay_learner import make_replay

        spaces = env_spaces(config)
        replay = make_replay(config.replay, config.seed, config.algo.gamma, config.env,
                             spaces.obs_shape, spaces.action_shape, spaces.discrete,
                             spaces.obs_format.dtype)
        soak.replay_capacity = config.replay.buffer_size
        soak.replay_bytes_per_step = _array_bytes(vars(replay)) / soak.replay_capacity
        soak.learner = next(r["rank"] for r in plan["ranks"] if r["role"] != "collector")
    return soak


def _array_bytes(value: object) -> int:
    """Bytes of the numpy arrays in a replay's attributes (lists and dicts looked into)."""
    if isinstance(value, np.ndarray):
        return value.nbytes
    if isinstance(value, dict):
        return sum(_array_bytes(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(_array_bytes(v) for v in value)
    if hasattr(value, "__dict__") and type(value).__module__.startswith("hpcrl"):
        return _array_bytes(vars(value))
    return 0


def rss_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def rank_of(pid: int) -> int | None:
    """The MPI rank of a process, from the launcher's environment variables."""
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    for item in env:
        for name in (b"PMI_RANK=", b"OMPI_COMM_WORLD_RANK=", b"PMIX_RANK="):
            if item.startswith(name):
                return int(item[len(name):])
    return None


def last_env_steps(progress: Path) -> int:
    try:
        with open(progress, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError:
        return 0
    return int(float(rows[-1]["env_steps"])) if rows else 0


def run(preset: str, seconds: float, interval: float, extra: list[str],
        light: bool = False) -> Soak:
    sets = sets_for(preset, extra, light)
    soak = describe(preset, sets)
    n = len(soak.roles)
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "hpcrl.cli", "train", "--run-dir", f"{tmp}/run"]
        if n > 1:
            cmd = [mpiexec(), "-n", str(n)] + cmd
        for item in sets:
            cmd += ["--set", item]
        job = subprocess.Popen(cmd, env=environment(), stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, start_new_session=True)
        pids: dict[int, int] = {}
        start = time.monotonic()
        try:
            while time.monotonic() - start < seconds and job.poll() is None:
                time.sleep(interval)
                if len(pids) < n:
                    pids = {0: job.pid} if n == 1 else {
                        r: p for p in python_ranks(job.pid) if (r := rank_of(p)) is not None}
                rss = [rss_bytes(pids[r]) if r in pids else 0 for r in range(n)]
                soak.samples.append((time.monotonic() - start,
                                     last_env_steps(Path(tmp) / "run" / "progress.csv"), rss))
        finally:
            if job.poll() is None:
                os.killpg(job.pid, signal.SIGKILL)
            _, err = job.communicate()
        if job.returncode not in (0, -signal.SIGKILL):
            raise RuntimeError(f"{preset} ended early with status {job.returncode}:\n"
                               f"{err.decode(errors='replace')[-2000:]}")
    return soak


def save_samples(soaks: list[Soak], path: Path) -> None:
    """Every sample as CSV rows (preset, seconds, env steps, rank, role, RSS bytes), to
    plot or fit again."""
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["preset", "seconds", "env_steps", "rank", "role", "rss_bytes"])
        for soak in soaks:
            for seconds, steps, rss in soak.samples:
                for rank, role in enumerate(soak.roles):
                    out.writerow([soak.preset, f"{seconds:.1f}", steps, rank, role, rss[rank]])


def table(soaks: list[Soak], seconds: float) -> str:
    lines = [f"RSS growth per million env steps after warm-up ({seconds:.0f} s per preset; "
             f"target < {TARGET_MB_PER_M} MB/M steps)",
             f"{'preset':<10} {'rank':>4} {'role':<16} {'env steps':>10} {'RSS MB':>8} "
             f"{'MB/M steps':>10} {'+-':>6}  note"]
    for soak in soaks:
        steps = soak.samples[-1][1] if soak.samples else 0
        for rank, role in enumerate(soak.roles):
            g = soak.growth(rank)
            rss = soak.samples[-1][2][rank] / 2**20 if soak.samples else 0.0
            note = soak.verdict(rank)
            if rank == soak.learner and soak.replay_capacity:
                fill = min(steps / soak.replay_capacity, 1.0)
                note += f" (replay {fill:.0%} full, its bytes taken out)"
            grown = "n/a" if g is None else f"{g[0]:10.3f} {g[1]:6.3f}"
            lines.append(f"{soak.preset:<10} {rank:>4} {role:<16} {steps:>10,} {rss:8.1f} "
                         f"{grown:>17}  {note}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--presets", default=",".join(PRESETS),
                        help="comma-separated presets (default: all)")
    parser.add_argument("--seconds", type=float, default=180.0, help="run time per preset")
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between samples")
    parser.add_argument("--set", dest="extra", action="append", default=[],
                        metavar="KEY=VALUE", help="extra `hpcrl train --set` for every preset")
    parser.add_argument("--light", action="store_true",
                        help="cheaper updates, the same updates and messages per env step")
    parser.add_argument("--samples", type=Path, metavar="CSV",
                        help="also write every RSS sample to this CSV file")
    args = parser.parse_args()
    print(machine_line(), flush=True)
    presets = [p for p in args.presets.split(",") if p]
    unknown = [p for p in presets if p not in PRESETS]
    if unknown:
        parser.error(f"unknown preset(s) {', '.join(unknown)}; choose from {', '.join(PRESETS)}")
    soaks = []
    for preset in presets:
        soaks.append(run(preset, args.seconds, args.interval, args.extra, args.light))
        print(table(soaks[-1:], args.seconds), flush=True)
        if args.samples:
            save_samples(soaks, args.samples)
    print()
    print(table(soaks, args.seconds))


if __name__ == "__main__":
    main()
