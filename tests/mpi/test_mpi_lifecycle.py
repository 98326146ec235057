"""Stop signals under MPI: every rank stops at one consistent point, the run is
checkpointed once, the job exits 3, and the resumed job ends where an uninterrupted one
does."""
import signal

import pytest
import torch

from mpirun import rows, run, signal_after_rows, start_training, train
from hpcrl.runtime.checkpoint import load_checkpoint
from hpcrl.runtime.run_dir import RunDir
from hpcrl.runtime.signals import EXIT_PREEMPTED

SETS = ["scheme.preset=ddppo", "scheme.allreduce=mpi", "train.total_env_steps=20480",
        "train.checkpoint_every=1000"]


@pytest.mark.timeout(180)
def test_usr1_checkpoints_stops_and_resumes_to_the_same_weights(tmp_path):
    train(2, tmp_path / "whole", SETS)
    job = start_training(2, tmp_path / "cut", SETS)
    signal_after_rows(job, tmp_path / "cut", 5, signal.SIGUSR1)
    _, err = job.communicate(timeout=60)
    assert job.returncode == EXIT_PREEMPTED, err[-2000:]
    assert "--resume" in err
    cut = RunDir(tmp_path / "cut")
    saved = load_checkpoint(cut.checkpoint_path)
    assert 5 <= saved["counters"]["updates"] < 40
    assert len(rows(tmp_path / "cut")) == saved["counters"]["updates"]
    done = run(2, ["train", "--resume", str(cut.path)], [], timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
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
