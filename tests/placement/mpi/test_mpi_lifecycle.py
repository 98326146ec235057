"""Starting, stopping and resuming under MPI: rank 0 picks the run directory for every rank
(after the world size is checked); on a stop signal every rank stops at one consistent point,
the run is checkpointed once, rank 0 says once how to resume, the job exits 3, and the
resumed job ends where an uninterrupted one does."""
import signal
import sys
from pathlib import Path

import pytest
import torch
from mpirun import FAST, rows, run, signal_after_rows, start_training, train

from hpcrl.runtime.checkpoint import load_checkpoint
from hpcrl.runtime.run_dir import RunDir
from hpcrl.runtime.signals import EXIT_PREEMPTED

# 24 updates of 2 ranks x 8 envs x 16 steps: the stop after the 5th lands mid-run with as
# many updates to spare as 32-step rollouts gave, at half their cost
SETS = ["scheme.preset=ddppo", "scheme.allreduce=mpi", "algo.num_steps=16",
        "train.total_env_steps=6144", "train.checkpoint_every=1000"]


@pytest.mark.timeout(180)
def test_usr1_checkpoints_stops_and_resumes_to_the_same_weights(tmp_path):
    train(2, tmp_path / "whole", SETS)
    job = start_training(2, tmp_path / "cut", SETS)
    signal_after_rows(job, tmp_path / "cut", 5, signal.SIGUSR1)
    _, err = job.communicate(timeout=60)
    assert job.returncode == EXIT_PREEMPTED, err[-2000:]
    # rank 0 says it once, with the launcher and rank count that resume the job
    assert err.count("stopped by SIGUSR1 after a checkpoint") == 1, err[-2000:]
    assert err.count("--resume") == 1
    assert f"continue with `mpiexec -n 2 hpcrl train --resume {tmp_path / 'cut'}`" in err
    cut = RunDir(tmp_path / "cut")
    saved = load_checkpoint(cut.checkpoint_path)
    assert 5 <= saved["counters"]["updates"] < 24
    assert len(rows(tmp_path / "cut")) == saved["counters"]["updates"]
    assert cut.stopped_path.read_text().startswith("SIGUSR1: checkpointed after")
    done = run(2, ["train", "--resume", str(cut.path)], [], timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert not cut.stopped_path.exists()
    whole = rows(tmp_path / "whole")
    resumed = rows(tmp_path / "cut")
    assert [r["env_steps"] for r in whole] == [r["env_steps"] for r in resumed]
    a = load_checkpoint(RunDir(tmp_path / "whole").checkpoint_path)["policy"]["state_dict"]
    b = load_checkpoint(cut.checkpoint_path)["policy"]["state_dict"]
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=0)


@pytest.mark.timeout(60)
def test_resume_without_a_checkpoint_says_so_and_stops(tmp_path):
    (tmp_path / "config.yaml").write_text("scheme:\n  preset: ddppo\n")
    done = run(2, ["train", "--resume", str(tmp_path)], [], timeout=50)
    assert done.returncode != 0
    assert "no checkpoint" in done.stderr
    assert not (tmp_path / "progress.csv").exists()  # nothing started from scratch


HPCRL = Path(sys.executable).with_name("hpcrl")  # the command a user types


@pytest.mark.timeout(120)
def test_mpiexec_without_run_dir_trains_in_the_default_run_dir(tmp_path):
    """`mpiexec -n 2 hpcrl train --set scheme.preset=ddppo`, as a new user types it."""
    done = run(2, ["train"], ["scheme.preset=ddppo", "train.total_env_steps=1024", *FAST],
               script=HPCRL, cwd=tmp_path, timeout=110)
    assert done.returncode == 0, done.stderr[-3000:]
    made = list((tmp_path / "runs").iterdir())
    assert len(made) == 1, made  # one directory, chosen by rank 0, shared by both ranks
    assert made[0].name.startswith("ppo-CartPole-v1-")
    assert RunDir(made[0]).checkpoint_path.is_file()
    assert rows(made[0]) and f"in {made[0]}" in done.stderr


@pytest.mark.timeout(60)
def test_wrong_world_size_without_run_dir_names_the_world_size(tmp_path):
    done = run(3, ["train"], ["scheme.preset=ddppo"], script=HPCRL, cwd=tmp_path, timeout=50)
    assert done.returncode == 2
    assert done.stderr.count("the scheme needs 2 ranks") == 1, done.stderr[-2000:]
    assert "mpiexec -n 2" in done.stderr and "run dir" not in done.stderr
    assert not (tmp_path / "runs").exists()  # checked before a run directory is made


@pytest.mark.timeout(60)
def test_a_run_dir_that_holds_a_run_is_refused_once(tmp_path):
    RunDir(tmp_path).checkpoint_path.parent.mkdir(parents=True)
    RunDir(tmp_path).checkpoint_path.write_bytes(b"")
    done = run(2, ["train", "--run-dir", str(tmp_path)], ["scheme.preset=ddppo"], timeout=50)
    assert done.returncode == 2
    assert done.stderr.count("already holds a run") == 1, done.stderr[-2000:]
    assert f"`mpiexec -n 2 hpcrl train --resume {tmp_path}`" in done.stderr


@pytest.mark.timeout(60)
def test_a_bad_config_under_mpiexec_is_said_once(tmp_path):
    done = run(2, ["train", "--run-dir", str(tmp_path / "run")],
               ["scheme.preset=ddppo", "algo.ppo.minibatch_size=100"], timeout=50)
    assert done.returncode == 1
    assert done.stderr.count("config key 'algo.ppo.minibatch_size' (100) must divide") == 1, \
        done.stderr[-2000:]
