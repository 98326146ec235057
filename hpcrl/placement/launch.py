"""What the launcher (``mpiexec``, ``srun``) told this process, and the advice that depends
on it: the world size it started, the lone-rank mismatch, and the command that resumes a run.

A launcher announces the job's size and this process's place in it in the environment before
MPI starts. When mpi4py's MPI library and the launcher do not speak the same process-management
interface, MPI gives every process a world of its own; comparing the two is how hpcrl tells
that apart from a launch with the wrong number of ranks.
"""
from __future__ import annotations

import os
import shlex
import signal
from collections.abc import Mapping
from pathlib import Path

from hpcrl.runtime.run_dir import ENV_FAILED_MARKER, LOST_MARKER, RunDir
from hpcrl.slurm.mpi_plugin import library_name, mpi_library_version, srun_launch

LAUNCHER_SIZE_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS",
                      "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "PMIX_SIZE")
LAUNCHER_RANK_VARS = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMIX_RANK")
SLURM_ONLY = ("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_PROCID")


def _env(environ: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if environ is None else environ


def in_slurm_step(environ: Mapping[str, str] | None = None) -> bool:
    """Whether srun started this process (a job step), rather than a batch shell or mpiexec."""
    return "SLURM_STEP_ID" in _env(environ)


def _first_number(names: tuple[str, ...], env: Mapping[str, str]) -> int | None:
    """The first of ``names`` set to a number; Slurm's count only inside a job step
    (a batch shell has SLURM_NTASKS too, for the whole allocation)."""
    for var in names:
        if var in SLURM_ONLY and not in_slurm_step(env):
            continue
        value = env.get(var, "")
        if value.isdigit():
            return int(value)
    return None


def launched_size(environ: Mapping[str, str] | None = None) -> int:
    """World size the launcher announced in the environment (1 when none did)."""
    env = _env(environ)
    sizes = [_first_number((var,), env) for var in LAUNCHER_SIZE_VARS]
    return max([s for s in sizes if s is not None] + [1])


def launched_rank(environ: Mapping[str, str] | None = None) -> int:
    """This process's rank as the launcher numbered it (0 when none did)."""
    found = _first_number(LAUNCHER_RANK_VARS, _env(environ))
    return 0 if found is None else found


def srun_command() -> str:
    """``srun --mpi=PLUGIN`` for mpi4py's MPI library (plain ``srun`` when unknown)."""
    return srun_launch().command


def lone_rank_problem(world_size: int,
                      environ: Mapping[str, str] | None = None) -> str | None:
    """What went wrong when the launcher started several processes but MPI put this one in
    a world of its own (None when it did not): the launcher and mpi4py's MPI library do not
    speak the same process-management interface."""
    started = launched_size(environ)
    if world_size != 1 or started <= 1:
        return None

    version, _ = mpi_library_version()
    library = library_name(version) if version else "mpi4py's MPI library"
    if in_slurm_step(environ):
        srun = srun_command()
        return (f"Slurm started {started} tasks, but each is alone in an MPI world of size 1: "
                f"srun's MPI plugin does not match {library}, the MPI library mpi4py runs on. "
                f"Start the step with `{srun}` (in hpcrl's batch scripts: leave HPCRL_LAUNCH "
                f"and --launch unset, or set HPCRL_LAUNCH='{srun}')")
    return (f"the launcher started {started} processes, but each is alone in an MPI world of "
            f"size 1: it belongs to another MPI library than {library}, the one mpi4py runs "
            f"on. Use the mpiexec of that library (the one next to the python that runs hpcrl)")


def resume_command(run_dir: Path, world_size: int,
                   environ: Mapping[str, str] | None = None) -> str:
    """The command that resumes ``run_dir`` with the launcher and rank count of this job."""
    train = f"hpcrl train --resume {shlex.quote(str(run_dir))}"
    if in_slurm_step(environ):
        return f"{srun_command()} -n {world_size} {train}"
    if world_size > 1:
        env = _env(environ)
        ft = " --with-ft ulfm" if env.get("OMPI_MCA_mpi_ft_enable") else ""  # as it was run
        return f"mpiexec{ft} -n {world_size} {train}"
    return train


def stop_message(run_dir: Path, world_size: int, signum: int | None,
                 environ: Mapping[str, str] | None = None) -> str:
    """What to tell the user once a stop signal has been answered with a checkpoint: how the
    run continues (a Slurm requeue after the warning signal, else the command to run)."""
    env = _env(environ)
    name = signal.Signals(signum).name if signum is not None else "a signal"
    command = resume_command(run_dir, world_size, env)
    head = f"hpcrl: stopped by {name} after a checkpoint in {run_dir}"
    job = env.get("SLURM_JOB_ID")
    if env.get("SLURM_ARRAY_JOB_ID"):  # a task of a job array: its own id, not the array's
        job = f"{env['SLURM_ARRAY_JOB_ID']}_{env.get('SLURM_ARRAY_TASK_ID', '')}"
    lost = _marker_note(run_dir, LOST_MARKER) if signum is None else None
    failed = _marker_note(run_dir, ENV_FAILED_MARKER) if signum is None else None
    if lost is not None:  # scheme.min_collectors: the templates requeue on it too
        head = f"hpcrl: stopped after a checkpoint in {run_dir}, {lost}"
    if failed is not None:  # the templates requeue it only while it makes progress
        head = (f"hpcrl: stopped after a checkpoint in {run_dir}: an env failed for good "
                f"(said above); fix it")
        if job:
            return (f"{head}; hpcrl's Slurm batch scripts requeue job {job} only if this "
                    f"step trained (a flaky env), at most HPCRL_ENV_REQUEUES times; by hand, "
                    f"in an allocation like this one: `{command}`")
        return f"{head}, then continue with `{command}`"
    if job and (signum == signal.SIGUSR1 or lost is not None):
        return (f"{head}; hpcrl's Slurm batch scripts now requeue job {job}, which resumes it "
                f"(unless HPCRL_REQUEUE=0); by hand, in an allocation like this one: "
                f"`{command}`")
    return f"{head}; continue with `{command}`"


def _marker_note(run_dir: Path, marker: str) -> str | None:
    """What the stop marker of a job stopped for ``marker``'s reason (lost collectors, an
    env that failed for good) says (None: it stopped for another)."""
    try:
        text = RunDir(Path(run_dir)).stopped_path.read_text().strip()
    except OSError:
        return None
    if not text.startswith(marker):
        return None
    return text[len(marker):].strip().split(": checkpointed")[0]
