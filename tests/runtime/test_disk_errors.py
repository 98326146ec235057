"""A full disk or an unwritable run directory stops the run with one message naming the file,
exits non-zero, and leaves the previous checkpoint loadable (``hpcrl eval`` still works).

The real cases use small tmpfs mounts (root only); where mounting is not allowed they skip
with the reason, and the fault-injecting tests, which always run, cover the same code path.
"""
from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from hpcrl.cli import main
from hpcrl.runtime import checkpoint
from hpcrl.runtime.checkpoint import load_checkpoint
from hpcrl.runtime.run_dir import RunDir

Mount = Callable[..., Path]


def invoke(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def train(run: Path, steps: int, *more: str):
    return invoke("train", "--run-dir", run, "--set", f"train.total_env_steps={steps}", *more)


def assert_clean_failure(out, what: str, path: Path, cause: str) -> None:
    assert out.exit_code != 0
    assert f"could not write the {what} '{path}': {cause}" in out.output, out.output
    assert "Traceback" not in out.output


def assert_previous_checkpoint_works(run: Path, env_steps: int) -> None:
    saved = load_checkpoint(RunDir(run).checkpoint_path)
    assert saved["counters"]["env_steps"] == env_steps
    assert [p.name for p in (run / "checkpoints").iterdir()] == ["last.pt"]  # no temp file
    ev = invoke("eval", run, "-n", 1)
    assert ev.exit_code == 0 and "mean return" in ev.output, ev.output


def _run_mount(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["mount", *args], capture_output=True, text=True)


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Mount]:
    """``tmpfs(size_bytes, name, read_only=False)`` mounts a tmpfs under ``tmp_path``."""
    mounted: list[Path] = []

    def mount(size: int, name: str = "disk", read_only: bool = False) -> Path:
        where = tmp_path / name
        where.mkdir()
        options = f"size={size}" + (",ro" if read_only else "")
        if os.geteuid() != 0 or shutil.which("mount") is None:
            pytest.skip("mounting a tmpfs needs root and mount(8); the fault-injecting tests "
                        "cover the same code")
        done = _run_mount("-t", "tmpfs", "-o", options, "tmpfs", str(where))
        if done.returncode != 0:
            pytest.skip(f"mounting a tmpfs is not permitted here ({done.stderr.strip()}); the "
                        f"fault-injecting tests cover the same code")
        mounted.append(where)
        return where

    yield mount
    for where in reversed(mounted):
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def checkpoint_size(tmp_path: Path, steps: int) -> tuple[Path, int]:
    run = tmp_path / "measured"
    assert train(run, steps).exit_code == 0
    return run, RunDir(run).checkpoint_path.stat().st_size


# -- full disk ---------------------------------------------------------------------------------
@pytest.mark.timeout(240)
def test_full_disk_stops_the_run_and_loses_nothing(tmp_path, tmpfs):
    first, size = checkpoint_size(tmp_path, 2048)
    disk = tmpfs(size + size // 2)  # room for one checkpoint, not for its replacement
    run = disk / "run"
    shutil.copytree(first, run)
    out = invoke("train", "--resume", run, "--set", "train.total_env_steps=4096")
    assert_clean_failure(out, "checkpoint", RunDir(run).checkpoint_path,
                         "No space left on device [ENOSPC]")
    assert "the previous checkpoint there is intact" in out.output
    assert_previous_checkpoint_works(run, 2048)

    _run_mount("-o", f"remount,size={8 * size}", str(disk))  # space freed: go on
    more = invoke("train", "--resume", run, "--set", "train.total_env_steps=4096")
    assert more.exit_code == 0, more.output
    assert load_checkpoint(RunDir(run).checkpoint_path)["counters"]["env_steps"] == 4096


@pytest.mark.timeout(120)
def test_disk_full_during_a_checkpoint_write_is_named(tmp_path, monkeypatch):
    """Fault injection: the file system refuses the checkpoint's bytes (what torch's zip
    writer otherwise reports as 'unexpected pos ...')."""
    run = tmp_path / "run"
    assert train(run, 1024).exit_code == 0

    def full(self, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(checkpoint._RecordingFile, "write", full)
    out = invoke("train", "--resume", run, "--set", "train.total_env_steps=2048")
    assert_clean_failure(out, "checkpoint", RunDir(run).checkpoint_path,
                         "No space left on device [ENOSPC]")
    monkeypatch.undo()
    assert_previous_checkpoint_works(run, 1024)


def test_write_error_reported_at_fsync_names_the_progress_log(tmp_path, monkeypatch):
    """Fault injection: a network file system reports a full disk at fsync; the rows are
    synced before each checkpoint, so the progress log is named and no checkpoint written."""
    run = tmp_path / "run"

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(os, "fsync", full)
    out = train(run, 1024)
    assert_clean_failure(out, "progress log", run / "progress.csv",
                         "No space left on device [ENOSPC]")
    assert not RunDir(run).checkpoint_path.exists()


def test_tensorboard_write_error_is_named(tmp_path, monkeypatch):
    pytest.importorskip("tensorboard", reason="the TensorBoard extra is not installed")
    from torch.utils.tensorboard import SummaryWriter

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(SummaryWriter, "add_scalar", full)
    run = tmp_path / "run"
    out = train(run, 1024)
    assert_clean_failure(out, "TensorBoard event files", run / "tensorboard",
                         "No space left on device [ENOSPC]")


# -- unwritable run directories ----------------------------------------------------------------
def test_run_dir_under_a_file_is_named(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    out = train(blocker / "run", 1024)
    assert_clean_failure(out, "run config", blocker / "run" / "config.yaml",
                         "Not a directory [ENOTDIR]")


@pytest.mark.timeout(120)
def test_read_only_run_dir_is_named_and_its_checkpoint_still_evaluates(tmp_path, tmpfs):
    first, size = checkpoint_size(tmp_path, 1024)
    disk = tmpfs(4 * size)
    shutil.copytree(first, disk / "run")
    _run_mount("-o", "remount,ro", str(disk))
    out = invoke("train", "--resume", disk / "run", "--set", "train.total_env_steps=2048")
    assert_clean_failure(out, "run config", disk / "run" / "config.yaml",
                         "Read-only file system [EROFS]")
    fresh = train(disk / "new", 1024)
    assert_clean_failure(fresh, "run config", disk / "new" / "config.yaml",
                         "Read-only file system [EROFS]")
    assert_previous_checkpoint_works(disk / "run", 1024)


# -- under MPI: the leader's failure ends every rank -------------------------------------------
@pytest.mark.timeout(180)
def test_full_disk_under_mpi_stops_the_whole_job_with_the_message(tmp_path, tmpfs):
    mpiexec = shutil.which("mpiexec", path=os.path.dirname(sys.executable))
    if mpiexec is None:
        pytest.skip("mpiexec not found: install the test extra (pip install -e '.[test]')")
    first, size = checkpoint_size(tmp_path, 1024)
    disk = tmpfs(size + size // 2 + 64 * 1024)  # an MPI checkpoint is a little larger
    run = disk / "run"
    cmd = [mpiexec, "-n", "2", sys.executable, "-m", "hpcrl.cli", "train", "--run-dir", str(run),
           "--set", "scheme.preset=ddppo", "--set", "train.total_env_steps=20480",
           "--set", "train.checkpoint_every=1", "--set", "train.eval_episodes=0"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=150,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode != 0
    message = f"could not write the checkpoint '{RunDir(run).checkpoint_path}': No space left"
    assert done.stderr.count(message) == 1, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    saved = load_checkpoint(RunDir(run).checkpoint_path)
    assert saved["counters"]["updates"] >= 1
    ev = invoke("eval", run, "-n", 1)
    assert ev.exit_code == 0, ev.output
