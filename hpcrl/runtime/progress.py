"""What a run records: ``progress.csv`` rows, TensorBoard scalars and console lines.

One row per update. On resume the CSV is cut back to the rows of the checkpoint, so a run
killed after its last checkpoint and resumed has no repeated or missing rows.
"""
from __future__ import annotations

import csv
import io
import math
import os
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from hpcrl.runtime.run_dir import writing

BASE_COLUMNS = ("env_steps", "updates", "wall_time_s", "fps", "episode_return_mean",
                "episode_length_mean", "episodes")
PROGRESS, TENSORBOARD = "progress log", "TensorBoard event files"
SCHEME_COLUMNS = ("policy_lag", "gradient_asynchrony", "dropped_rollouts", "time_collect_s",
                  "time_wait_s", "time_compute_s", "time_communicate_s", "live_collectors",
                  "env_restarts")


def columns_for(stat_names: Sequence[str]) -> list[str]:
    """CSV columns: counters, the algorithm's loss terms, optimiser figures (``skipped_updates``
    counts the gradient steps of the update dropped under ``train.on_nonfinite=skip_update``),
    scheme metrics."""
    return [*BASE_COLUMNS, *stat_names, "grad_norm", "learning_rate", "skipped_updates",
            *SCHEME_COLUMNS]


def _replace(path: Path, lines: list[str]) -> None:
    """``path`` holding ``lines``, replaced atomically (temporary file, fsync, rename)."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "w", newline="") as f:
        f.writelines(lines)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def truncate_rows(path: Path, rows: int) -> None:
    """Keep the header and the first ``rows`` data rows of a CSV file (atomically)."""
    if not path.exists():
        return
    with open(path, newline="") as f:
        lines = f.readlines()
    _replace(path, lines[:1 + rows])


def rewrite_rows(path: Path, columns: Sequence[str], rows: Iterable[Mapping[str, Any]]
                 ) -> None:
    """``path`` as a CSV file of ``rows`` under the header ``columns`` (a column a row lacks
    left empty), replaced atomically: a file an earlier hpcrl wrote with fewer columns."""
    text = io.StringIO()
    writer = csv.DictWriter(text, columns, restval="", extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    _replace(path, text.getvalue().splitlines(keepends=True))


def count_rows(path: Path) -> int:
    """The data rows of the CSV file at ``path`` (its header not counted; 0 when it is absent)."""
    if not path.exists():
        return 0
    with open(path, newline="") as f:
        return max(sum(1 for _ in f) - 1, 0)


class ProgressLog:
    """Appends rows to ``progress.csv`` and mirrors them to TensorBoard.

    Rows are flushed as written (they survive the process being killed) and forced to disk
    by :meth:`sync` before each checkpoint (they survive the machine going down).
    """

    def __init__(self, run_dir: Path, columns: Sequence[str], resume_rows: int | None,
                 tensorboard: bool) -> None:
        self.path = run_dir / "progress.csv"
        self.tb_path = run_dir / "tensorboard"
        self.columns = list(columns)
        with writing(PROGRESS, self.path):
            if resume_rows is not None and self.path.exists():
                if count_rows(self.path) < resume_rows:
                    raise RuntimeError(f"{self.path} has fewer rows than the checkpoint's "
                                       f"{resume_rows} updates: the run directory was altered")
                truncate_rows(self.path, resume_rows)
                self.columns = _header(self.path) or self.columns  # a run of an older version
                self.file: IO[str] = open(self.path, "a", newline="")
                self.writer = csv.DictWriter(self.file, self.columns, extrasaction="ignore")
            else:
                self.file = open(self.path, "w", newline="")
                self.writer = csv.DictWriter(self.file, self.columns, extrasaction="ignore")
                self.writer.writeheader()
        with writing(TENSORBOARD, self.tb_path):
            self.tb = (_tensorboard_writer(self.tb_path, (resume_rows or 0) + 1)
                       if tensorboard else None)

    def write(self, row: Mapping[str, Any]) -> None:
        """Append ``row`` (its values for :attr:`columns`, a missing one empty) and flush; with
        TensorBoard, also each finite number as a scalar at step ``env_steps``."""
        with writing(PROGRESS, self.path):
            self.writer.writerow({k: _fmt(row.get(k, "")) for k in self.columns})
            self.file.flush()
        if self.tb is not None:
            step = int(row["env_steps"])
            with writing(TENSORBOARD, self.tb_path):
                for key in self.columns:
                    value = row.get(key)
                    if (isinstance(value, (int, float)) and math.isfinite(value)
                            and key != "env_steps"):
                        self.tb.add_scalar(key, value, step)

    def sync(self) -> None:
        """Force the rows to disk (before a checkpoint that counts them is written)."""
        with writing(PROGRESS, self.path):
            self.file.flush()
            os.fsync(self.file.fileno())
        if self.tb is not None:
            with writing(TENSORBOARD, self.tb_path):
                self.tb.flush()

    def close(self) -> None:
        """Close the CSV file and the TensorBoard writer."""
        with writing(PROGRESS, self.path):
            self.file.close()
        if self.tb is not None:
            with writing(TENSORBOARD, self.tb_path):
                self.tb.close()


def _header(path: Path) -> list[str]:
    """The columns of an existing CSV file (its rows continue under them on resume)."""
    with open(path, newline="") as f:
        return next(csv.reader(f), [])


def _fmt(value: Any) -> Any:
    if isinstance(value, float):
        return f"{value:.6g}"
    return value


def _tensorboard_writer(log_dir: Path, purge_step: int) -> Any:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:  # tensorboard is an optional extra
        return None
    return SummaryWriter(str(log_dir), purge_step=purge_step)


def _duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    seconds = int(seconds)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


class ConsoleProgress:
    """Prints env steps, FPS, mean return and ETA at most every ``interval_s`` seconds."""

    def __init__(self, total_env_steps: int, interval_s: float,
                 stream: IO[str] = sys.stderr) -> None:
        self.total, self.interval, self.stream = total_env_steps, interval_s, stream
        self.last = -math.inf

    def show(self, row: Mapping[str, Any], final: bool = False) -> None:
        """Print ``row``'s steps, FPS, mean return and ETA, unless the last line is less than
        ``interval_s`` old (``final`` prints regardless)."""
        now = time.monotonic()
        if not final and now - self.last < self.interval:
            return
        self.last = now
        steps, fps = int(row["env_steps"]), float(row["fps"])
        eta = max(self.total - steps, 0) / fps if fps > 0 else math.inf
        ret = row.get("episode_return_mean")
        ret_text = f"{ret:8.1f}" if isinstance(ret, float) and math.isfinite(ret) else "     n/a"
        print(f"steps {steps:>10,}/{self.total:,} ({100 * steps / self.total:5.1f}%) | "
              f"{fps:8,.0f} fps | return {ret_text} | ETA {_duration(eta)}",
              file=self.stream, flush=True)
