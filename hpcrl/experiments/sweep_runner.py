"""Runs of hpcrl as local processes, N at a time: :class:`LocalRunner`, which ``hpcrl
sweep`` (:class:`SweepRunner`: a sweep's points) and ``hpcrl pbt`` (a population's members)
both use.

Each run is its own process (a point's ``hpcrl train``, under ``mpiexec -n N`` when its
scheme needs N ranks; a member's ``hpcrl pbt --member K``), so a run that fails leaves the
others running; its console output goes to ``<dir>/logs/<name>.log``. The runs are in their
own process sessions: Ctrl-C (SIGINT), SIGTERM or SIGUSR1 reach the runner alone, which
starts no more runs and asks the running ones to checkpoint and stop with SIGUSR1 (which
mpiexec passes on to every rank, and hpcrl treats as SIGTERM); the same command, given again,
resumes them.
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from hpcrl.experiments.sweep import Sweep, SweepError, check_points
from hpcrl.runtime.run_dir import RunDir, is_finished
from hpcrl.runtime.signals import EXIT_ENV_FAILED, EXIT_PREEMPTED
from hpcrl.scheme.topology import required_world_size

POLL_S = 0.2


@dataclass
class Outcome:
    """How one run's process ended this time."""

    name: str
    status: str      # finished, stopped, env failed or failed
    exit_code: int
    seconds: float


@dataclass(frozen=True)
class LocalJob:
    """One run to train as a local process: its name (its log's), its command line, and
    the run directory that says how it ended."""

    name: str
    command: list[str]
    run: RunDir


def mpiexec_command(launch: str | None, ranks: int) -> list[str]:
    """The launcher words of a point with ``ranks`` ranks: ``--launch`` (e.g. 'mpirun
    --oversubscribe') or the mpiexec beside this interpreter (or on PATH), with ``-n``."""
    if launch:
        words = shlex.split(launch)
    else:
        found = (shutil.which("mpiexec", path=os.path.dirname(sys.executable))
                 or shutil.which("mpiexec"))
        if found is None:
            raise SweepError(f"the sweep's scheme needs {ranks} ranks per point but no "
                             f"mpiexec was found; install an MPI (pip install 'hpcrl[mpi]') "
                             f"or give --launch 'mpirun ...'")
        words = [found]
    return [*words, "-n", str(ranks)]


def point_commands(sweep: Sweep, launch: str | None) -> dict[str, list[str]]:
    """The full command line of every point (checked configs decide the rank counts)."""
    python = [sys.executable, "-m", "hpcrl.cli"]
    commands = {}
    for point, config in zip(sweep.points, check_points(sweep), strict=True):
        ranks = required_world_size(config.scheme)
        prefix = mpiexec_command(launch, ranks) if ranks > 1 or launch else []
        commands[point.name] = [*prefix, *python, *sweep.train_args(point)]
    return commands


def _last_line(path: Path) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][-200:] if lines else ""


class LocalRunner:
    """Runs local jobs, ``parallel`` at a time, saying what happens as ``label``."""

    def __init__(self, label: str, logs: Path, parallel: int = 1,
                 say: Callable[[str], None] = print) -> None:
        self.label, self.logs, self.parallel, self.say = label, logs, parallel, say
        self.stop_signal: int | None = None

    def _stop(self, signum: int, frame: object) -> None:
        if self.stop_signal is None:
            self.say(f"{self.label}: {signal.Signals(signum).name}: starting no more runs; "
                     f"the running ones checkpoint and stop")
        self.stop_signal = signal.SIGUSR1  # mpiexec passes it on to every rank

    def run(self, todo: list[LocalJob]) -> list[Outcome]:
        """Train every job of ``todo``; returns how each process ended."""
        self.logs.mkdir(parents=True, exist_ok=True)
        previous = {s: signal.signal(s, self._stop)
                    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)}
        try:
            return self._loop(list(todo))
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)

    def _start(self, job: LocalJob) -> tuple[subprocess.Popen, IO[str], float]:
        log = open(self.logs / f"{job.name}.log", "a")
        log.write(f"== {time.strftime('%Y-%m-%d %H:%M:%S')} {shlex.join(job.command)}\n")
        log.flush()
        resumed = job.run.checkpoint_path.exists()
        self.say(f"{self.label}: {'resume' if resumed else 'start '} {job.name}")
        proc = subprocess.Popen(job.command, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        return proc, log, time.monotonic()

    def _loop(self, queue: list[LocalJob]) -> list[Outcome]:
        outcomes = []
        # a running job: the job, its process, its log and when it started
        running: dict[str, tuple[LocalJob, subprocess.Popen, IO[str], float]] = {}
        forwarded: int | None = None
        while queue or running:
            while queue and len(running) < self.parallel and self.stop_signal is None:
                job = queue.pop(0)
                running[job.name] = (job, *self._start(job))
            if self.stop_signal is not None and forwarded is None:
                forwarded = self.stop_signal
                for _, proc, _, _ in running.values():
                    try:
                        os.killpg(proc.pid, forwarded)
                    except ProcessLookupError:
                        pass
                queue.clear()
            time.sleep(POLL_S)
            for name, (job, proc, log, began) in list(running.items()):
                code = proc.poll()
                if code is None:
                    continue
                log.close()
                del running[name]
                outcomes.append(self._ended(job, code, time.monotonic() - began))
        return outcomes

    def _ended(self, job: LocalJob, code: int, seconds: float) -> Outcome:
        run = job.run
        if code == 0 and is_finished(run):
            status, what = "finished", self._evaluation(run.eval_path)
        elif code == EXIT_ENV_FAILED:  # (its run's stop marker says which env and why)
            status, what = "env failed", "checkpointed; fix the env, the same command resumes it"
        elif code == EXIT_PREEMPTED or run.stopped_path.exists():
            status, what = "stopped", "checkpointed; the same command resumes it"
        else:
            status = "failed"
            log = self.logs / f"{job.name}.log"
            what = f"exit {code}; {log}: {_last_line(log)}"
        self.say(f"{self.label}: {status:8s} {job.name} after {seconds:.0f} s ({what})")
        return Outcome(job.name, status, code, seconds)

    @staticmethod
    def _evaluation(path: Path) -> str:
        if not path.exists():
            return "no evaluation: train.eval_episodes is 0"
        return f"eval {json.loads(path.read_text())['mean_return']:.1f}"


class SweepRunner(LocalRunner):
    """Runs the unfinished points of a sweep, ``jobs`` at a time."""

    def __init__(self, sweep: Sweep, jobs: int = 1, launch: str | None = None,
                 say: Callable[[str], None] = print) -> None:
        if jobs < 1:
            raise SweepError(f"--jobs {jobs}: give 1 or more points to run at a time")
        super().__init__("hpcrl sweep", sweep.path / "logs", jobs, say)
        self.sweep, self.launch = sweep, launch

    def run_sweep(self) -> list[Outcome]:
        """Train every point that has not finished; returns how each run ended."""
        commands = point_commands(self.sweep, self.launch)  # every point checked first
        todo = [self.sweep.points[i] for i in self.sweep.unfinished()]
        done = len(self.sweep.points) - len(todo)
        self.say(f"hpcrl sweep: {len(self.sweep.points)} points in {self.sweep.path}: "
                 f"{done} finished, {len(todo)} to train, {self.parallel} at a time")
        return self.run([LocalJob(p.name, commands[p.name], self.sweep.run_dir(p))
                         for p in todo])


def exit_code(outcomes: list[Outcome]) -> int:
    """1 when a run failed, 4 when a run's env failed for good (checkpointed, but a
    requeue would fail again), 3 when a stop left runs to resume, else 0."""
    statuses = {o.status for o in outcomes}
    if "failed" in statuses:
        return 1
    if "env failed" in statuses:
        return EXIT_ENV_FAILED
    return EXIT_PREEMPTED if "stopped" in statuses else 0
