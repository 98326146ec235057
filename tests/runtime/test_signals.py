"""Stop signals: checkpoint at the end of the update, stop, and resume exactly."""
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from hpcrl.config import from_dict
from hpcrl.placement.serial_run import Trainer, resume_config
from hpcrl.runtime.checkpoint import load_checkpoint
from hpcrl.runtime.run_dir import RunDir
from hpcrl.runtime.signals import STOP_REQUEST


@pytest.fixture(autouse=True)
def clear_request():
    STOP_REQUEST.clear()
    yield
    STOP_REQUEST.clear()


@pytest.mark.parametrize("signum", [signal.SIGUSR1, signal.SIGTERM])
def test_signal_checkpoints_stops_and_resumes_exactly(tmp_path, tiny_overrides, monkeypatch,
                                                      signum):
    cfg = from_dict({}, tiny_overrides)
    Trainer(cfg, RunDir(tmp_path / "whole"), console=None).train()

    cut = Trainer(cfg, RunDir(tmp_path / "cut"), console=None)
    learner = type(cut.learner)
    original = learner.learn_update
    def signalled(self):
        if self.leader.updates == 6:
            os.kill(os.getpid(), signum)  # arrives mid-update, like the scheduler's
        return original(self)
    monkeypatch.setattr(learner, "learn_update", signalled)
    assert cut.train() is None and cut.preempted
    state = load_checkpoint(RunDir(tmp_path / "cut").checkpoint_path)
    assert state["counters"]["updates"] == 7  # the update in progress finished first
    marker = RunDir(tmp_path / "cut").stopped_path  # what the batch scripts requeue on
    assert marker.read_text().startswith(f"{signal.Signals(signum).name}: checkpointed after "
                                         f"7 updates")
    assert not RunDir(tmp_path / "whole").stopped_path.exists()
    monkeypatch.setattr(learner, "learn_update", original)
    STOP_REQUEST.clear()

    run = RunDir(tmp_path / "cut")
    resumed = Trainer(resume_config(run, []), run, resume=True, console=None)
    assert not marker.exists()  # running again
    resumed.train()
    a = load_checkpoint(RunDir(tmp_path / "whole").checkpoint_path)["policy"]["state_dict"]
    b = load_checkpoint(run.checkpoint_path)["policy"]["state_dict"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert signal.getsignal(signal.SIGUSR1) is not STOP_REQUEST._handle  # handlers restored


def test_only_an_announcing_process_says_it_received_the_signal(capsys):
    restore = STOP_REQUEST.install()
    try:
        STOP_REQUEST.announce = False
        os.kill(os.getpid(), signal.SIGUSR1)
        assert STOP_REQUEST.requested and capsys.readouterr().err == ""
        STOP_REQUEST.clear()
        STOP_REQUEST.announce = True
        os.kill(os.getpid(), signal.SIGUSR1)
        assert "received SIGUSR1" in capsys.readouterr().err
    finally:
        STOP_REQUEST.clear()
        STOP_REQUEST.announce = True
        restore()



@pytest.mark.timeout(150)
def test_a_signal_to_every_process_of_the_job_still_checkpoints(tmp_path, tiny_overrides):
    """Slurm and mpiexec signal every process of a job step, the processes the envs started
    included (ViZDoom's engine, async envs' subprocesses); those must not die of it, or the
    collector, which steps on while its learner finishes the update, fails instead of the
    job checkpointing."""
    run = tmp_path / "run"
    sets = [*tiny_overrides, "train.total_env_steps=10000000", "train.log_interval_s=0.01",
            "scheme.preset=async-ppo", "scheme.collectors_per_worker=1",
            "env.id=hpcrl_testenvs:ProcessCartPole-v0"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(__file__).parents[1] / "placement" / "mpi"), os.environ.get("PYTHONPATH", "")])}
    cmd = [shutil.which("mpiexec") or "mpiexec", "-n", "2", sys.executable, "-m", "hpcrl.cli",
           "train", "--run-dir", str(run)]
    for s in sets:
        cmd += ["--set", s]
    job = subprocess.Popen(cmd, env=env, start_new_session=True, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 100
        while not _has_row(run / "progress.csv") and job.poll() is None:
            assert time.monotonic() < deadline, "no progress row within 100 s"
            time.sleep(0.2)
        time.sleep(0.5)  # the collector steps on
        os.killpg(job.pid, signal.SIGUSR1)  # mpiexec passes it on to every process
        output, _ = job.communicate(timeout=40)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
    assert job.returncode == 3, output
    assert "stopped by SIGUSR1 after a checkpoint" in output
    assert load_checkpoint(RunDir(run).checkpoint_path)["counters"]["updates"] >= 1


def _has_row(progress: Path) -> bool:
    """Whether ``progress`` holds a row after its header."""
    return progress.exists() and len(progress.read_text().splitlines()) > 1
