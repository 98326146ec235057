"""What Slurm sees of a job that fails: the step's exit status makes it FAILED (never
COMPLETED, which nobody would look into), and it is not requeued; a job whose env failed for
good is requeued only while it trains, and ends FAILED with status 4 and its checkpoint. The
same ways of ending under mpiexec are in tests/placement/mpi/test_exit_status.py.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import slurmtools as st
from template_jobs import job_env, log_text, render_job, write_config

pytestmark = pytest.mark.slurm

MPI_TESTS = Path(__file__).resolve().parents[1] / "placement" / "mpi"  # faulty env, probe


@pytest.mark.timeout(300)
def test_a_template_job_whose_env_fails_for_good_checkpoints_requeues_once_then_fails(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # MPICH (the test extra's MPI), whose job would end with a lost collector: the collector
    # whose env fails (restarts off) tells rank 0 instead, which checkpoints and stops with
    # status 4. The step trained before the failure (a flaky env), so the script requeues it
    # (HPCRL_ENV_REQUEUES=1); the resumed step fails again after training, and with its
    # requeues spent the job ends FAILED, its checkpoint kept for a resume once it is fixed.
    monkeypatch.syspath_prepend(str(MPI_TESTS))  # rendering checks the config's env id
    config = write_config(tmp_path, {
        "scheme": {"preset": "async-ppo", "collectors_per_worker": 1},
        "env": {"id": "hpcrl_faults:FaultyCartPole-v0", "max_restarts": 0},
        "algo": {"num_steps": 32},
        "train": {"total_env_steps": 1_000_000}})
    _, script = render_job(tmp_path, "async", "fails", config=str(config), nodes=1,
                           gpus_per_node=1)
    run_dir = tmp_path / "fails"
    env = {**job_env(tmp_path / "probe"), "HPCRL_FAULT": "raise:1", "HPCRL_FAULT_STEP": "200",
           "HPCRL_ENV_REQUEUES": "1"}
    env["HPCRL_SETUP"] += f"; export PYTHONPATH={MPI_TESTS}:${{PYTHONPATH:-}}"
    job = st.submit(script, env=env)
    st.wait_requeued(job, restarts=1, timeout=150)
    st.release(job)
    assert st.wait_job(job, timeout=200) == "FAILED", st.job_info(job)
    info = st.job_info(job)
    assert info["ExitCode"] == "4:0" and info.get("Restarts") == "1", info
    log = log_text(tmp_path, "fails", job)
    assert log.count("hpcrl: rank 1 (collector of gradient worker 0 on ") == 2, log[-3000:]
    assert "RuntimeError: the env broke (injected fault)" in log
    assert log.count("checkpointing and stopping with exit status 4") == 2
    assert "requeueing job" in log and "(1 of HPCRL_ENV_REQUEUES=1)" in log
    assert "an env failed for good; not requeued" in log
    assert (run_dir / "stopped").read_text().startswith("env failed: rank 1 ")
    from hpcrl.runtime.checkpoint import load_checkpoint

    state = load_checkpoint(run_dir / "checkpoints" / "last.pt")
    assert state["counters"]["env_steps"] > 0 and state["placement"]["collectors"] == []


@pytest.mark.timeout(180)
def test_a_template_job_whose_env_is_broken_is_not_requeued(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    # an env that fails before the step trained anything (a broken simulator, a missing
    # asset) would fail again after a requeue: the job ends FAILED with status 4 at once
    monkeypatch.syspath_prepend(str(MPI_TESTS))
    config = write_config(tmp_path, {
        "scheme": {"preset": "async-ppo", "collectors_per_worker": 1},
        "env": {"id": "hpcrl_faults:FaultyCartPole-v0", "max_restarts": 0},
        "train": {"total_env_steps": 1_000_000}})
    _, script = render_job(tmp_path, "async", "broken", config=str(config), nodes=1,
                           gpus_per_node=1)
    env = {**job_env(tmp_path / "probe"), "HPCRL_FAULT": "raise:1", "HPCRL_FAULT_STEP": "5"}
    env["HPCRL_SETUP"] += f"; export PYTHONPATH={MPI_TESTS}:${{PYTHONPATH:-}}"
    job = st.submit(script, env=env)
    assert st.wait_job(job, timeout=150) == "FAILED", st.job_info(job)
    info = st.job_info(job)
    assert info["ExitCode"] == "4:0" and info.get("Restarts", "0") == "0", info
    log = log_text(tmp_path, "broken", job)
    assert "an env failed for good; not requeued" in log, log[-3000:]
    assert "requeueing" not in log
    assert (tmp_path / "broken" / "checkpoints" / "last.pt").exists()


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
