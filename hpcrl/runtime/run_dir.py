"""The layout of a run directory.

    RUN_DIR/
      config.yaml          the resolved config (what `--resume` trains on)
      progress.csv         one row per update
      tensorboard/         event files (when tensorboard is installed)
      checkpoints/last.pt  full training state, replaced atomically
      checkpoints/best.pt  the policy of the best evaluation during training (eval_every)
      checkpoints/steps-N.pt  the last train.keep_checkpoints checkpoints, when more than 1
      eval.json            deterministic evaluation at the end of training
      eval.csv             one row per evaluation during training (train.eval_every)
      stopped              present only after a checkpointed stop on a signal (what a
                           batch script reads to requeue the job); removed when it resumes

A file of the run that cannot be written (a full disk, a read-only or unwritable directory)
stops the run with a :class:`RunWriteError` naming the file, what it is and the cause,
raised by the writers through :func:`writing`.
"""
from __future__ import annotations

import csv
import errno
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml

from hpcrl.errors import ExplainedError

_FULL = (errno.ENOSPC, errno.EDQUOT)


class RunWriteError(ExplainedError):
    """A file of a run (checkpoint, progress.csv, config.yaml, eval.json, TensorBoard events)
    could not be written; the message names the file, the cause and the fix."""


def write_error(what: str, path: Path, err: OSError, note: str = "") -> RunWriteError:
    """The :class:`RunWriteError` for ``err`` raised while writing ``what`` to ``path``."""
    code = errno.errorcode.get(err.errno, "") if err.errno else ""
    cause = f"{err.strerror or err}{f' [{code}]' if code else ''}"
    if err.errno in _FULL:
        fix = "free space on that file system, or use a run directory on another one"
    else:
        fix = "make that directory writable, or use a run directory where it is"
    return RunWriteError(f"could not write the {what} '{path}': {cause}{note}; {fix}")


@contextmanager
def writing(what: str, path: Path) -> Iterator[None]:
    """Turn an ``OSError`` raised in the body into a :class:`RunWriteError` naming ``what``
    (e.g. "progress file") and ``path``."""
    try:
        yield
    except OSError as err:
        raise write_error(what, path, err) from err


def write_run_file(what: str, path: Path, text: str) -> None:
    """Write ``text`` to ``path`` (creating its directory), as :func:`writing` reports."""
    with writing(what, path):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


# how the stop marker of a job stopped for lost collectors begins (scheme.min_collectors):
# the Slurm templates requeue on it as on the warning signal
LOST_MARKER = "lost collectors:"
# how the stop marker of a job stopped for an env that failed for good begins: the Slurm
# templates requeue it only while it makes progress (hpcrl.placement.env_failures)
ENV_FAILED_MARKER = "env failed:"


@dataclass(frozen=True)
class RunDir:
    """A run directory, and the paths of its files (see the module docstring)."""
    path: Path

    @property
    def config_path(self) -> Path:
        """``config.yaml``: the resolved config (what ``--resume`` trains on)."""
        return self.path / "config.yaml"

    @property
    def progress_path(self) -> Path:
        """``progress.csv``: one row per update."""
        return self.path / "progress.csv"

    @property
    def checkpoint_path(self) -> Path:
        """``checkpoints/last.pt``: the full training state, replaced atomically."""
        return self.path / "checkpoints" / "last.pt"

    @property
    def eval_path(self) -> Path:
        """``eval.json``: the deterministic evaluation at the end of training."""
        return self.path / "eval.json"

    @property
    def eval_curve_path(self) -> Path:
        """``eval.csv``: one row per evaluation during training (``train.eval_every``)."""
        return self.path / "eval.csv"

    @property
    def best_path(self) -> Path:
        """The policy of the best evaluation during training (``train.eval_every``)."""
        return self.path / "checkpoints" / "best.pt"

    @property
    def trained_path(self) -> Path:
        """The marker a run writes once it recorded its first update (rank 0's, in a job):
        a batch script removes it before each step and starts again a step that failed
        without it, a launch that failed before any work (``HPCRL_START_RETRIES``)."""
        return self.path / "trained"

    @property
    def stopped_path(self) -> Path:
        """The marker of a checkpointed stop on a signal. A batch script requeues the job when
        it exists, not on the step's exit status alone: when one rank exits first, srun
        ``--kill-on-bad-exit`` may kill the others after the checkpoint, turning their status
        3 into 143."""
        return self.path / "stopped"


def last_env_steps(run: RunDir) -> int:
    """The env steps of the last row of the run's ``progress.csv`` (0 without one)."""
    if not run.progress_path.is_file():
        return 0
    with open(run.progress_path, newline="") as f:
        rows = list(csv.DictReader(f))
    try:
        return int(float(rows[-1].get("env_steps") or 0)) if rows else 0
    except ValueError:
        return 0


def is_finished(run: RunDir) -> bool:
    """The run trained its whole budget: its final evaluation is written, or (with
    ``train.eval_episodes`` 0) its checkpoint and last progress row reached the budget."""
    if run.eval_path.exists():
        return True
    if not (run.checkpoint_path.exists() and run.config_path.is_file()):
        return False
    train = (yaml.safe_load(run.config_path.read_text()) or {}).get("train", {})
    return (int(train.get("eval_episodes", 1)) <= 0
            and last_env_steps(run) >= int(train.get("total_env_steps", 0)))


def default_run_dir(algo_name: str, env_id: str, root: Path = Path("runs")) -> Path:
    """``runs/<algo>-<env>-<date>-<time>`` for a run of ``algo.name`` on ``env.id``, made
    unique with a suffix if it exists."""
    env = env_id.rsplit(":", 1)[-1].replace("/", "_")
    algo = algo_name.rsplit(":", 1)[-1].rsplit(".", 1)[-1]  # a plug-in: its class
    base = root / f"{algo}-{env}-{time.strftime('%Y%m%d-%H%M%S')}"
    path, n = base, 1
    while path.exists():
        path = base.with_name(f"{base.name}-{n}")
        n += 1
    return path
