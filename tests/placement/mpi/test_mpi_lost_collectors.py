"""A job that survives its collectors (issue 26): faults injected on real ranks.

Under Open MPI 5 with ``mpiexec --with-ft ulfm`` an asynchronous job goes on when a collector
rank dies or hangs, names it, counts ``live_collectors`` in progress.csv, and stops with
exit status 3 (a checkpoint written) below ``scheme.min_collectors``; the resumed job starts
at its full size. Under MPICH (the test extra's MPI) the job says at start-up that a lost
collector ends it, and a hung collector ends it after ``scheme.collector_timeout_s`` instead
of keeping it waiting until its time limit.

Open MPI comes from tests/placement/mpi/openmpi.py.
"""
from __future__ import annotations

import csv
import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import openmpi as ompi
import pytest
from mpirun import HERE, ROOT, mpiexec

pytestmark = pytest.mark.timeout(300)
SMALL = ["scheme.collectors_per_worker=3", "env.num_envs=4", "algo.num_steps=64",
         "env.id=hpcrl_faults:FaultyCartPole-v0", "train.tensorboard=false",
         "train.eval_episodes=2", "train.log_interval_s=60"]
NOT_PPO = ("scheme.preset=impala", "scheme.preset=apex", "scheme.preset=async-sac")


def small(sets: list[str]) -> list[str]:
    """SMALL + ``sets``, with PPO's minibatch where the job trains PPO (the impala, apex and
    async-sac presets bring algorithms of their own, which refuse PPO's keys)."""
    ppo = [] if any(s in sets for s in NOT_PPO) else ["algo.ppo.minibatch_size=192"]
    return SMALL + ppo + sets


@pytest.fixture(scope="session")
def openmpi() -> Path:
    """Open MPI's prefix (installed on first use)."""
    return ompi.install()


def _env(fault: str, step: int, extra: dict[str, str] | None = None) -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "HPCRL_FAULT": fault,
            "HPCRL_FAULT_STEP": str(step),
            "PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT), os.environ.get("PYTHONPATH",
                                                                                  "")]),
            **(extra or {})}


def ft_command(prefix: Path, n: int, args: list[str]) -> list[str]:
    """What a user runs: Open MPI's ``mpiexec --with-ft ulfm``."""
    return ompi.hpcrl_command(prefix, n, args)


def ft_env(prefix: Path, fault: str = "none:", step: int = 200,
           extra: dict[str, str] | None = None) -> dict[str, str]:
    return ompi.environment(prefix, {"HPCRL_FAULT": fault, "HPCRL_FAULT_STEP": str(step),
                                     **(extra or {})})


def sets_args(sets: list[str]) -> list[str]:
    out: list[str] = []
    for item in sets:
        out += ["--set", item]
    return out


def train_ft(prefix: Path, n: int, run_dir: Path, sets: list[str], fault: str,
             step: int = 200, timeout: float = 180,
             extra: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``hpcrl train`` under ``mpiexec --with-ft ulfm`` with ``fault`` (hpcrl_faults) and
    the environment variables ``extra``."""
    args = ["train", "--run-dir", str(run_dir), *sets_args(small(sets))]
    return subprocess.run(ft_command(prefix, n, args), capture_output=True, text=True,
                          timeout=timeout, env=ft_env(prefix, fault, step, extra), cwd=ROOT)


def live_column(run_dir: Path) -> list[int]:
    with open(run_dir / "progress.csv") as f:
        return [int(float(r["live_collectors"])) for r in csv.DictReader(f)]


def steps_done(run_dir: Path) -> int:
    with open(run_dir / "progress.csv") as f:
        return int(float(list(csv.DictReader(f))[-1]["env_steps"]))


def assert_checkpoint_sound(run_dir: Path, live: int, collectors: int = 3) -> dict:
    """The checkpoint loads, every weight is finite, and it counts the live collectors (of
    ``collectors``)."""
    import torch

    from hpcrl.runtime.checkpoint import load_checkpoint

    state = load_checkpoint(run_dir / "checkpoints" / "last.pt")
    weights = state["policy"]["state_dict"]
    assert all(torch.isfinite(v).all() for v in weights.values() if v.is_floating_point())
    assert state["live_collectors"] == live and state["collector_ranks"] == collectors
    return state


# (name, fault, extra keys): every asynchronous scheme, a collector killed in each place
KILLS = [
    # one job, 4 collectors: rank 2 killed mid-rollout, rank 3 mid-send, rank 4 during a
    # weights message; rank 1 finishes the budget alone
    ("async-ppo, mid-rollout, mid-send and during a weights message",
     "rollout:2;send:3;weights:4", ["scheme.preset=async-ppo",
                                    "scheme.collectors_per_worker=4",
                                    "algo.ppo.minibatch_size=256"]),
    # IMPALA's job plays a self-play league on tic-tac-toe: its collectors' envs hold the
    # league's opponents, and a lost one leaves the league growing from the others
    ("impala league", "rollout:2", ["scheme.preset=impala", "env.multiagent=true",
                                    "env.id=hpcrl_faults:faulty_tictactoe",
                                    "actor.action_mask=true", "env.league.snapshot_every=2000"]),
    ("async-sac", "rollout:2", ["scheme.preset=async-sac", "algo.num_steps=50",
                                "env.id=hpcrl_faults:FaultyPendulum-v0",
                                "replay.learning_starts=300"]),
    ("apex", "rollout:2", ["scheme.preset=apex", "algo.num_steps=64",
                           "replay.learning_starts=300"]),
    # ranks 0 learner, 1 inference rank, 2-4 collectors acting through it
    ("async-ppo with an inference rank", "rollout:3", ["scheme.preset=async-ppo",
                                                        "scheme.inference_ranks=1"]),
]


@pytest.mark.parametrize("name,fault,keys", KILLS, ids=[k[0] for k in KILLS])
def test_a_killed_collector_leaves_a_job_that_finishes_its_budget(openmpi, tmp_path, name,
                                                                  fault, keys):
    # wiring, not learning: a budget that runs well past the kill (at the 100th env step of
    # each env, 1,200 steps of the job's 3 collectors); the league's 12,000 make its
    # snapshots
    budget = 3000 if "apex" in name or "sac" in name else 12000 if "league" in name else 6000
    collectors = 4 if "scheme.collectors_per_worker=4" in keys else 3
    n = collectors + (2 if "inference" in name else 1)
    run_dir = tmp_path / "run"
    done = train_ft(openmpi, n, run_dir, keys + [f"train.total_env_steps={budget}"], fault,
                    step=100)
    assert done.returncode == 0, done.stderr[-3000:]
    killed = [r for spec in fault.split(";") for r in spec.split(":")[1].split(",")]
    for rank in killed:
        assert f"rank {rank} (collector of gradient worker 0 on " in done.stderr, \
            done.stderr[-2000:]
    assert done.stderr.count("died without a word") == len(killed), done.stderr[-2000:]
    live = live_column(run_dir)
    # (a kill at the first send: all but one from the first row)
    assert live[-1] == collectors - len(killed), live
    assert set(live) <= set(range(collectors - len(killed), collectors + 1)), live
    assert steps_done(run_dir) >= budget
    assert (run_dir / "eval.json").exists()
    assert_checkpoint_sound(run_dir, live=collectors - len(killed), collectors=collectors)
    if "league" in name:  # snapshots by rank 0; matches logged by the collectors' envs
        from hpcrl.league.match_log import read_matches
        from hpcrl.league.snapshots import snapshots

        assert len(snapshots(run_dir / "league")) >= 3
        assert {m.env_seed for m in read_matches(run_dir / "league")} == set(range(12))


def test_below_min_collectors_the_job_stops_with_3_and_resumes_whole(openmpi, tmp_path):
    run_dir = tmp_path / "run"
    # (the kills come at each env's 100th step, about 1,200 of the job's; the resumed job
    # trains the rest of the 6,000)
    done = train_ft(openmpi, 4, run_dir, ["scheme.preset=async-ppo", "scheme.min_collectors=2",
                                          "train.total_env_steps=6000"], "rollout:2,3",
                    step=100)
    assert done.returncode == 3, done.stderr[-3000:]
    assert "1 of the job's 3 collector ranks live (lost: 2, 3), fewer than " \
           "scheme.min_collectors=2" in done.stderr
    assert f"`mpiexec --with-ft ulfm -n 4 hpcrl train --resume {run_dir}`" in done.stderr
    marker = (run_dir / "stopped").read_text()
    assert marker.startswith("lost collectors: 1 of the job's 3 collector ranks live")
    state = assert_checkpoint_sound(run_dir, live=1)
    stopped_at = int(state["counters"]["env_steps"])
    assert stopped_at < 6000 and not (run_dir / "eval.json").exists()
    resumed = subprocess.run(ft_command(openmpi, 4, ["train", "--resume", str(run_dir)]),
                             capture_output=True, text=True, timeout=180,
                             env=ft_env(openmpi), cwd=ROOT)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    live = live_column(run_dir)
    assert live[-1] == 3 and 1 in live, live  # back at its full size
    assert steps_done(run_dir) >= 6000 and (run_dir / "eval.json").exists()
    assert not (run_dir / "stopped").exists()
    assert_checkpoint_sound(run_dir, live=3)


def _pid_of_rank(rank: int, run_dir: Path) -> int | None:
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if (f"OMPI_COMM_WORLD_RANK={rank}".encode() in environ
                and str(run_dir).encode() in cmdline and b"hpcrl.cli" in cmdline):
            return int(pid)
    return None


def _kill_rank_after_rows(rank: int, run_dir: Path, rows: int) -> threading.Thread:
    def kill() -> None:
        deadline = time.monotonic() + 120
        progress = run_dir / "progress.csv"
        while time.monotonic() < deadline:
            if progress.exists() and len(progress.read_text().splitlines()) > rows:
                pid = _pid_of_rank(rank, run_dir)
                if pid is not None:
                    os.kill(pid, signal.SIGKILL)
                    return
            time.sleep(0.05)

    thread = threading.Thread(target=kill, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("rank,role", [(0, "gradient worker 0"),
                                       (1, "inference rank of gradient worker 0")])
def test_losing_a_learner_or_inference_rank_ends_the_job_at_once(openmpi, tmp_path, rank,
                                                                 role):
    run_dir = tmp_path / "run"
    keys = ["scheme.preset=async-ppo", "train.total_env_steps=10000000"]
    if rank == 1:
        keys.append("scheme.inference_ranks=1")
    killer = _kill_rank_after_rows(rank, run_dir, 3)
    started = time.monotonic()
    done = train_ft(openmpi, 5 if rank == 1 else 4, run_dir, keys, "none:", timeout=120)
    killer.join()
    assert done.returncode != 0
    assert time.monotonic() - started < 90
    assert f"rank {rank} ({role} on " in done.stderr, done.stderr[-2000:]
    assert "was lost: a job goes on only without collectors" in done.stderr


def test_under_mpich_a_hung_collector_ends_the_job_naming_it(tmp_path):
    run_dir = tmp_path / "run"
    args = ["train", "--run-dir", str(run_dir),
            *sets_args(small(["scheme.preset=async-ppo", "train.total_env_steps=10000000",
                              "scheme.collector_timeout_s=4"]))]
    done = subprocess.run([mpiexec(), "-n", "4", sys.executable, "-m", "hpcrl.cli", *args],
                          capture_output=True, text=True, timeout=120,
                          env=_env("hang:2", 60), cwd=ROOT)
    assert done.returncode != 0
    assert ("a lost collector ends this job: MPICH" in done.stdout + done.stderr)
    assert "Open MPI 5 started with `mpiexec --with-ft ulfm` survives" in done.stdout + \
        done.stderr
    assert "rank 2 (collector of gradient worker 0) on " in done.stderr
    assert re.search(r"sent nothing for \d+ s", done.stderr) and "the job ends" in done.stderr
    assert math.isfinite(float(steps_done(run_dir)))


def test_the_last_meeting_waits_for_every_live_rank_after_a_loss(openmpi):
    # a rank that leaves the meeting early with status 3 would let the launcher end a late
    # rank 0 before its last words (the stop message and checkpoint of a stopped job)
    done = subprocess.run([str(openmpi / "bin" / "mpiexec"), "--with-ft", "ulfm",
                           "--oversubscribe", "--allow-run-as-root", "-n", "3",
                           sys.executable, str(HERE / "last_meeting.py"), "3"],
                          capture_output=True, text=True, timeout=120, env=ft_env(openmpi),
                          cwd=ROOT)
    assert done.returncode == 3, done.stderr[-3000:]
    said = done.stderr.index("rank 0: my last words")
    assert done.stderr.index("rank 1: met") > said, done.stderr[-3000:]
    assert "rank 0: met" in done.stderr, done.stderr[-3000:]
