"""The srun MPI plugin that matches mpi4py's MPI library, and what a rank says when srun (or
mpiexec) and the library do not match: one message from task 0, naming the plugin."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from hpcrl.cli import main
from hpcrl.placement.launch import launched_size, lone_rank_problem, stop_message
from hpcrl.slurm import RenderOptions, render
from hpcrl.slurm.mpi_plugin import library_name, plugin_for

HPCRL = Path(sys.executable).with_name("hpcrl")


@pytest.mark.parametrize("version, plugin", [
    ("MPICH Version:      5.0.2\nMPICH Release date: ...", "pmi2"),
    ("Intel(R) MPI Library 2021.9 for Linux* OS\n", "pmi2"),
    ("MPI VERSION    : CRAY MPICH version 8.1.27.26 (ANL base 3.4a2)", "pmi2"),
    ("MVAPICH2 Version      :\t2.3.7\n", "pmi2"),
    ("Open MPI v5.0.3, package: Open MPI builder, ident: 5.0.3, repo rev: v5.0.3", "pmix"),
    ("IBM Spectrum MPI 10.4.0.6, package: ...", "pmix"),
    ("Some Vendor MPI 1.0", None),
])
def test_the_plugin_follows_the_mpi_library(version, plugin):
    assert plugin_for(version) == plugin


def test_library_names_are_short():
    assert library_name("MPICH Version:      5.0.2\nMPICH Release date: x") == "MPICH 5.0.2"
    assert library_name("Open MPI v5.0.3, package: Open MPI x") == "Open MPI v5.0.3"


def test_render_without_launch_picks_the_plugin_of_this_mpi4py():
    """The test venv's mpi4py runs on the pip MPICH: srun needs PMI-2."""
    rendered = render(RenderOptions("sync", nodes=1, gpus_per_node=2))
    assert "\nHPCRL_LAUNCH='srun --mpi=pmi2'  # render\n" in rendered.text
    header = rendered.text[:rendered.text.index("\n#\n")]
    assert "#   launch: srun --mpi=pmi2 (matches MPICH " in header
    chosen = render(RenderOptions("sync", nodes=1, gpus_per_node=2, launch="srun --mpi=pmix"))
    assert "HPCRL_LAUNCH='srun --mpi=pmix'" in chosen.text and "(--launch)" in chosen.text


def test_launcher_command_prints_the_srun_command():
    out = CliRunner().invoke(main, ["slurm", "launcher"])
    assert out.exit_code == 0, out.output
    assert out.stdout == "srun --mpi=pmi2\n"
    assert "MPICH" in out.stderr


STEP = {"SLURM_JOB_ID": "77", "SLURM_STEP_ID": "0", "SLURM_NTASKS": "4",
        "SLURM_STEP_NUM_TASKS": "4"}


def test_slurm_counts_only_inside_a_step():
    assert launched_size({"SLURM_NTASKS": "8"}) == 1  # a batch shell, not a rank
    assert launched_size(STEP) == 4
    assert launched_size({"PMI_SIZE": "3"}) == 3


def test_lone_rank_problem_names_the_mismatch_and_the_plugin():
    problem = lone_rank_problem(1, STEP)
    assert problem is not None and problem.startswith("Slurm started 4 tasks")
    assert "`srun --mpi=pmi2`" in problem and "mpiexec" not in problem
    assert lone_rank_problem(4, STEP) is None  # a real world of 4
    assert lone_rank_problem(1, {}) is None    # a plain serial run
    assert "mpiexec of that library" in lone_rank_problem(1, {"PMI_SIZE": "2"})


def _train_as_task(procid: int, tmp_path: Path) -> subprocess.Popen:
    """`hpcrl train --set scheme.preset=ddppo` as task PROCID of a 4-task srun step whose
    plugin does not match: MPI gives the process a world of its own."""
    env = {**os.environ, **STEP, "SLURM_PROCID": str(procid), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, str(HPCRL), "train", "--set", "scheme.preset=ddppo"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            cwd=tmp_path)


@pytest.mark.timeout(240)
def test_lone_ranks_of_a_slurm_step_stop_with_one_message(tmp_path):
    tasks = [_train_as_task(0, tmp_path), _train_as_task(2, tmp_path)]
    (_, first), (_, other) = [t.communicate(timeout=200) for t in tasks]
    assert [t.returncode for t in tasks] == [2, 2]
    assert first.count("hpcrl: Slurm started 4 tasks, but each is alone in an MPI "
                       "world of size 1") == 1, first
    assert "srun --mpi=pmi2" in first and "mpiexec" not in first
    assert "hpcrl:" not in other, other  # task 0 speaks for all
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("env, signum, expected", [
    ({}, signal.SIGUSR1, "; continue with `hpcrl train --resume /r`"),
    ({"PMI_SIZE": "3"}, signal.SIGTERM, "; continue with `mpiexec -n 3 hpcrl train --resume /r`"),
    ({**STEP, "SLURM_NTASKS": "3", "SLURM_STEP_NUM_TASKS": "3"}, signal.SIGUSR1,
     "now requeue job 77, which resumes it (unless HPCRL_REQUEUE=0); by hand, in an "
     "allocation like this one: `srun --mpi=pmi2 -n 3 hpcrl train --resume /r`"),
    ({**STEP, "SLURM_NTASKS": "3", "SLURM_STEP_NUM_TASKS": "3"}, signal.SIGTERM,
     "; continue with `srun --mpi=pmi2 -n 3 hpcrl train --resume /r`"),
])
def test_stop_message_gives_the_command_that_resumes(env, signum, expected):
    size = launched_size(env)
    text = stop_message(Path("/r"), size, signum, env)
    assert text.startswith(f"hpcrl: stopped by {signal.Signals(signum).name} after a "
                           f"checkpoint in /r")
    assert text.endswith(expected), text


def test_a_stop_for_lost_collectors_says_why_and_how_it_resumes(tmp_path):
    (tmp_path / "stopped").write_text("lost collectors: 1 of the job's 3 collector ranks live "
                                      "(lost: 2, 3), fewer than scheme.min_collectors=2: "
                                      "checkpointed after 3 updates (2304 env steps)\n")
    text = stop_message(tmp_path, 4, None, {"OMPI_MCA_mpi_ft_enable": "1"})
    assert text == (f"hpcrl: stopped after a checkpoint in {tmp_path}, 1 of the job's 3 "
                    f"collector ranks live (lost: 2, 3), fewer than scheme.min_collectors=2; "
                    f"continue with `mpiexec --with-ft ulfm -n 4 hpcrl train --resume "
                    f"{tmp_path}`")
    in_slurm = stop_message(tmp_path, 4, None, {"SLURM_JOB_ID": "7"})
    assert "hpcrl's Slurm batch scripts now requeue job 7" in in_slurm
