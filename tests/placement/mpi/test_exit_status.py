"""What the launcher reports for every way a job ends, under each MPI hpcrl supports: the
exit status is what Slurm sees (a COMPLETED job is never requeued, and nobody reads its log).

- MPICH's ``mpiexec`` (the test extra's MPI), Open MPI's ``mpiexec``, and Open MPI's with
  ``--with-ft ulfm``, where ``MPI_Abort`` ends the caller alone and a job whose last live
  rank aborted used to exit 0 (:mod:`hpcrl.comm.job_end`); srun is in tests/slurm.
- A failure exits non-zero: an error on a rank while others work, an error on the last
  live rank, an error in a job of one rank, an error on rank 0 of a training job.
- A job that loses every collector of a learner checkpoints, stops with status 3 and
  resumes at its full size; under MPICH that loss ends the job with a failure.
- An env that fails for good checkpoints and stops the job with status 4 under every MPI,
  for both families and for DD-PPO's learners with envs of their own; the run resumes.
- The budget done exits 0, a stop signal 3 (tests/placement/mpi/test_mpi_lifecycle.py), fewer live
  collectors than ``scheme.min_collectors`` 3 and a lost learner or inference rank non-zero
  (tests/placement/mpi/test_mpi_lost_collectors.py).
"""
from __future__ import annotations

import csv
import re
import subprocess
import sys
import time
from pathlib import Path

import openmpi as ompi
import pytest
from mpirun import HERE, ROOT, mpiexec

pytestmark = pytest.mark.timeout(300)
LAUNCHERS = ("mpich", "openmpi", "openmpi-ulfm")
ENDS_WITHIN_S = 45.0  # a failed job ends in seconds, not at its time limit
SMALL = ["env.id=hpcrl_faults:FaultyCartPole-v0", "env.num_envs=4", "algo.num_steps=64",
         "algo.ppo.minibatch_size=128", "train.tensorboard=false", "train.eval_episodes=2",
         "train.log_interval_s=60"]


@pytest.fixture(scope="session")
def openmpi() -> Path:
    """Open MPI's prefix (installed on first use)."""
    return ompi.install()


def launch(name: str, n: int, program: list[str], openmpi: Path,
           extra_env: dict[str, str] | None = None,
           timeout: float = 120) -> subprocess.CompletedProcess:
    """``program`` on ``n`` ranks started by launcher ``name`` (one of :data:`LAUNCHERS`)."""
    if name == "mpich":
        command = [mpiexec(), "-n", str(n)]
        env = ompi.environment(openmpi)
        for key in ("MPI4PY_MPIABI", "MPI4PY_LIBMPI"):
            env.pop(key)
    else:
        command = ompi.launcher(openmpi, n, ft=name == "openmpi-ulfm")
        env = ompi.environment(openmpi)
    return subprocess.run(command + program, capture_output=True, text=True, timeout=timeout,
                          env={**env, **(extra_env or {})}, cwd=ROOT)


def train(name: str, n: int, run_dir: Path, sets: list[str], openmpi: Path, fault: str,
          step: int = 100, p: float = 0.001, resume: bool = False
          ) -> subprocess.CompletedProcess:
    """``hpcrl train`` (or ``--resume``) on ``n`` ranks, with ``fault`` injected
    (tests/placement/mpi/hpcrl_faults.py); PPO's keys of :data:`SMALL` go to PPO alone."""
    base = SMALL if "scheme.preset=apex" not in sets else \
        [s for s in SMALL if not s.startswith("algo.ppo.")]
    args = ["train", "--resume", str(run_dir)] if resume else \
        ["train", "--run-dir", str(run_dir)] + [a for s in base + sets for a in ("--set", s)]
    return launch(name, n, [sys.executable, "-m", "hpcrl.cli", *args], openmpi,
                  {"HPCRL_FAULT": fault, "HPCRL_FAULT_STEP": str(step),
                   "HPCRL_FAULT_P": str(p)}, timeout=180)


def progress(run_dir: Path) -> list[dict[str, str]]:
    with open(run_dir / "progress.csv") as f:
        return list(csv.DictReader(f))


def sound_checkpoint(run_dir: Path) -> dict:
    """The checkpoint loads and every weight in it is finite."""
    import torch

    from hpcrl.runtime.checkpoint import load_checkpoint

    state = load_checkpoint(run_dir / "checkpoints" / "last.pt")
    weights = state["policy"]["state_dict"]
    assert all(torch.isfinite(v).all() for v in weights.values() if v.is_floating_point())
    return state


@pytest.mark.parametrize("launcher", LAUNCHERS)
@pytest.mark.parametrize("case,n", [("error", 3), ("last", 3), ("alone", 1)])
def test_a_failed_job_never_exits_0(openmpi, launcher, case, n):
    started = time.monotonic()
    done = launch(launcher, n, [sys.executable, str(HERE / "exit_probe.py"), case], openmpi)
    assert done.returncode != 0, (done.returncode, done.stderr[-2000:])
    assert time.monotonic() - started < ENDS_WITHIN_S, done.stderr[-2000:]
    if case != "last":  # there the kills end the job first (under ULFM: rank 0's watch)
        assert "hpcrl: rank" in done.stderr and "failed" in done.stderr, done.stderr[-2000:]
    elif launcher == "openmpi-ulfm":
        assert "hpcrl: rank 1 (probe rank 1) was lost: this job cannot go on without it" \
            in done.stderr, done.stderr[-2000:]


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_an_env_failing_on_rank_0_of_ddppo_checkpoints_and_stops_with_4(openmpi, tmp_path,
                                                                        launcher):
    # DD-PPO: each rank learns from its own envs, and rank 0's env raises (env.max_restarts=0:
    # the env's error is not met by making it again); every learner skips the update with it
    run_dir = tmp_path / "run"
    done = train(launcher, 2, run_dir, ["scheme.preset=ddppo", "env.max_restarts=0",
                                        "train.total_env_steps=100000"],
                 openmpi, "raise:0", step=100)
    assert done.returncode == 4, done.stderr[-2000:]
    assert re.search(r"hpcrl: rank 0 \(gradient worker 0 \+ collector on \S+\): one of the "
                     r"envs 0-3 \(global index\) failed: RuntimeError: the env broke "
                     r"\(injected fault\)", done.stderr), done.stderr[-2000:]
    assert (run_dir / "stopped").read_text().startswith("env failed: rank 0 ")
    state = sound_checkpoint(run_dir)
    # rank 1's envs are in it; rank 0's failed ones are not (they start afresh on resume)
    assert [c["env_offset"] for c in state["placement"]["collectors"]] == [4]


# (ranks, scheme keys, the collectors whose envs fail at random, budget), per family
ENV_FAILURES = {
    "async-ppo": (4, ["scheme.preset=async-ppo", "scheme.collectors_per_worker=3",
                      "algo.ppo.minibatch_size=192"], "flaky:1,2,3", 6000),
    "apex": (3, ["scheme.preset=apex"], "flaky:1,2", 3000),
}


@pytest.mark.parametrize("launcher", LAUNCHERS)
@pytest.mark.parametrize("family", ENV_FAILURES)
def test_an_env_that_fails_for_good_checkpoints_stops_with_4_and_resumes(openmpi, tmp_path,
                                                                         launcher, family):
    """The reported case: every collector's env raises now and then (restarts off); the
    first failure ends the job in order under every MPI: rank 0 names the rank, the env and
    its error, checkpoints and stops with status 4; once the env is fixed the run resumes
    to the end of its budget (under MPICH and ULFM; Open MPI without it writes the same)."""
    n, keys, fault, budget = ENV_FAILURES[family]
    run_dir = tmp_path / "run"
    sets = [*keys, f"train.total_env_steps={budget}", "env.max_restarts=0"]
    # (armed from each env's 200th step, when the job has trained; then soon: 1 % a step)
    done = train(launcher, n, run_dir, sets, openmpi, fault, step=200, p=0.01)
    assert done.returncode == 4, done.stderr[-3000:]
    assert re.search(r"hpcrl: rank [1-3] \(collector of gradient worker 0 on \S+\): one of "
                     r"the envs \d+-\d+ \(global index\) failed: RuntimeError: the env broke "
                     r"at random \(injected fault\) \(env.max_restarts=0", done.stderr), \
        done.stderr[-3000:]
    assert "checkpointing and stopping with exit status 4" in done.stderr
    assert "fix it, then continue with `" in done.stderr
    assert (run_dir / "stopped").read_text().startswith("env failed: rank ")
    state = sound_checkpoint(run_dir)
    rows = progress(run_dir)  # every update recorded is in the checkpoint: nothing is lost
    assert int(state["counters"]["env_steps"]) == int(rows[-1]["env_steps"]) < budget
    assert int(state["counters"]["updates"]) == len(rows)
    assert len(state["placement"]["collectors"]) < n - 1  # the failed place starts afresh
    if launcher == "openmpi":
        return  # (resumed under the other two: the checkpoint is the same)
    # the job again, its env fixed: from the checkpoint to the end of its budget
    resumed = train(launcher, n, run_dir, [], openmpi, "none:", resume=True)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert int(progress(run_dir)[-1]["env_steps"]) >= budget
    assert (run_dir / "eval.json").exists() and not (run_dir / "stopped").exists()


# (name, ranks, keys, the collector killed): each learner layout that can lose every
# collector of one learner while another learner still has its own
STARVED = [
    ("two learners, all-reduced", 4, [], "3"),
    ("an updater and two learners", 5, ["scheme.update=central"], "4"),
    ("an updater applying gradients as they come", 5,
     ["scheme.update=central", "scheme.gradients=async"], "4"),
]


@pytest.mark.parametrize("name,n,keys,killed", STARVED, ids=[s[0] for s in STARVED])
def test_a_learner_that_lost_every_collector_stops_the_job_with_3(openmpi, tmp_path, name, n,
                                                                   keys, killed):
    run_dir = tmp_path / "run"
    sets = ["scheme.preset=async-ppo", "scheme.gradient_workers=2",
            "scheme.collectors_per_worker=1", "train.total_env_steps=200000", *keys]
    done = train("openmpi-ulfm", n, run_dir, sets, openmpi, f"rollout:{killed}", step=150)
    assert done.returncode == 3, done.stderr[-3000:]
    assert "1 of the job's 2 collector ranks live" in done.stderr, done.stderr[-3000:]
    assert "1 of the job's 2 learners lost every collector of theirs" in done.stderr
    assert (run_dir / "stopped").read_text().startswith("lost collectors:")
    assert sound_checkpoint(run_dir)["live_collectors"] == 1


def test_under_mpich_losing_every_collector_fails_the_job(openmpi, tmp_path):
    done = train("mpich", 3, tmp_path / "run", ["scheme.preset=async-ppo",
                                               "train.total_env_steps=100000"],
                 openmpi, "rollout:1,2", step=50)
    assert done.returncode != 0 and done.returncode != 4, done.stderr[-2000:]
