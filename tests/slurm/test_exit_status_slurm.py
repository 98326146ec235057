"""What Slurm sees of a job that fails: the step's exit status makes it FAILED (never
COMPLETED, which nobody would look into), and it is not requeued. The same ways of ending
under mpiexec are in tests/placement/mpi/test_exit_status.py.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import slurmtools as st
from template_jobs import job_env, log_text, render_job, write_config

pytestmark = pytest.mark.slurm

MPI_TESTS = Path(__file__).resolve().parents[1] / "placement" / "mpi"  # faulty env, probe


@pytest.mark.timeout(240)
def test_a_template_job_whose_collector_fails_ends_failed(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    # MPICH (the test extra's MPI) cannot go on without a collector: the job ends
    monkeypatch.syspath_prepend(str(MPI_TESTS))  # rendering checks the config's env id
    config = write_config(tmp_path, {
        "scheme": {"preset": "async-ppo", "collectors_per_worker": 1},
        "env": {"id": "hpcrl_faults:FaultyCartPole-v0", "max_restarts": 0},
        "train": {"total_env_steps": 1_000_000}})
    _, script = render_job(tmp_path, "async", "fails", config=str(config), nodes=1,
                           gpus_per_node=1)
    env = {**job_env(tmp_path / "probe"), "HPCRL_FAULT": "raise:1", "HPCRL_FAULT_STEP": "50"}
    env["HPCRL_SETUP"] += f"; export PYTHONPATH={MPI_TESTS}:${{PYTHONPATH:-}}"
    job = st.submit(script, env=env)
    assert st.wait_job(job, timeout=200) == "FAILED", st.job_info(job)
    info = st.job_info(job)
    assert info["ExitCode"] != "0:0" and info.get("Restarts", "0") == "0", info
    log = log_text(tmp_path, "fails", job)
    assert "hpcrl: rank 1 (collector of gradient worker 0) failed:" in log, log[-3000:]
    assert "RuntimeError: the env broke (injected fault)" in log
    assert "requeueing" not in log


@pytest.mark.timeout(180)
def test_an_srun_step_whose_last_live_rank_fails_ends_failed(tmp_path: Path) -> None:
    """The mechanism every rank uses to end a job, under srun: the other ranks die first,
    then the last live one fails."""
    script = st.batch_script(
        f"export PYTHONPATH={MPI_TESTS.parents[2]}:${{PYTHONPATH:-}}\n"
        f"srun --mpi=pmi2 --kill-on-bad-exit=1 {sys.executable} "
        f"{MPI_TESTS / 'exit_probe.py'} last\n",
        directives=["--ntasks=3", "--time=5", f"--output={tmp_path}/probe-%j.out"])
    job = st.submit(script, env={"OMP_NUM_THREADS": "1"})
    assert st.wait_job(job, timeout=150) == "FAILED", st.job_info(job)
    assert st.job_info(job)["ExitCode"] != "0:0"
