"""The templates' lifecycle, run by bash with fake srun, mpirun and scontrol (no Slurm):
start or resume, forward the warning signal, requeue only after a checkpointed stop."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from hpcrl.slurm import RenderOptions, render
from hpcrl.slurm.templates import TEMPLATE_NAMES, template_path

pytestmark = pytest.mark.timeout(60)
LONG = "400"  # fake steps of a job that runs until it is signalled

FAKE_SRUN = r"""#!/bin/bash
echo "$*" > "$FAKE_LOG/launcher"
echo "$*" >> "$FAKE_LOG/sruns"
while [[ "$1" == -* ]]; do shift; done
cmd=()
for a in "$@"; do [[ "$a" == : ]] && break; cmd+=("$a"); done
exec "${cmd[@]}"
"""
FAKE_MPIRUN = r"""#!/bin/bash
echo "$*" > "$FAKE_LOG/launcher"
while [[ $# -gt 0 && "$1" != -n ]]; do shift; done
shift 2
exec "$@"
"""
FAKE_SCONTROL = r"""#!/bin/bash
if [[ "$1 $2" == "show hostnames" ]]; then tr , '\n' <<<"$3"; exit 0; fi
echo "$*" >> "$FAKE_LOG/scontrol"
"""
# Open MPI's mpiexec: records its arguments and its daemon agent (the agent then starts a
# daemon on a node of each component, through the fake srun), then runs the first app
# context's command
FAKE_MPIEXEC = r"""#!/bin/bash
args=("$@")
for ((i = 0; i < $#; i++)); do
    [[ "${args[i]}" == plm_ssh_agent ]] && cp "${args[i + 1]}" "$FAKE_LOG/agent"
done
"$FAKE_LOG/agent" gpu1 true daemon gpu1 && "$FAKE_LOG/agent" cpu2 true daemon cpu2 || exit 9
echo "$*" > "$FAKE_LOG/launcher"
while [[ $# -gt 0 && "$1" != -n ]]; do shift; done
shift 2
cmd=()
for a in "$@"; do [[ "$a" == : ]] && break; cmd+=("$a"); done
exec "${cmd[@]}"
"""
# stands in for `hpcrl`: answers `hpcrl slurm launcher` with a fake plugin; records its
# arguments, runs FAKE_STEPS x 50 ms; on USR1/TERM writes RUN_DIR/stopped and exits 3 like
# hpcrl does (FAKE_STOP_EXIT: the status srun reports instead, FAKE_NO_MARKER: no checkpoint);
# the first FAKE_FAIL_STARTS starts fail before any work (no RUN_DIR/trained)
FAKE_HPCRL = r"""#!/bin/bash
if [[ "$1 $2" == "slurm launcher" ]]; then echo "srun --mpi=fake"; exit 0; fi
printf '%s\n' "$@" > "$FAKE_LOG/args"
echo "${FROM_SETUP-}" > "$FAKE_LOG/setup"
run_dir=""
while [[ $# -gt 0 ]]; do
    [[ "$1" == --run-dir || "$1" == --resume ]] && run_dir="$2"
    shift
done
stop() {
    echo "$1" >> "$FAKE_LOG/signals"
    if [[ -z "${FAKE_NO_MARKER-}" ]]; then mkdir -p "$run_dir"; touch "$run_dir/stopped"; fi
    exit "${FAKE_STOP_EXIT:-3}"
}
trap 'stop USR1' USR1
trap 'stop TERM' TERM
echo x >> "$FAKE_LOG/starts"  # FAKE_FAIL_STARTS: the first N starts fail at "MPI_Init"
if (($(wc -l < "$FAKE_LOG/starts") <= ${FAKE_FAIL_STARTS:-0})); then exit 134; fi
mkdir -p "$run_dir" && touch "$run_dir/trained"  # as rank 0 does at its first update
touch "$FAKE_LOG/ready"
if [[ -n "${FAKE_LOST-}" ]]; then  # too few collectors live: checkpointed and stopped
    mkdir -p "$run_dir"
    echo "lost collectors: 1 of the job's 3 collector ranks live: checkpointed" > "$run_dir/stopped"
    exit 3
fi
for i in $(seq "${FAKE_STEPS:-0}"); do sleep 0.05; done
exit "${FAKE_EXIT:-0}"
"""


@pytest.fixture
def fakes(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("srun", FAKE_SRUN), ("mpirun", FAKE_MPIRUN), ("mpiexec", FAKE_MPIEXEC),
                       ("scontrol", FAKE_SCONTROL), ("fake-hpcrl", FAKE_HPCRL)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    (tmp_path / "log").mkdir()
    (tmp_path / "tmp").mkdir()
    return tmp_path


def start(fakes: Path, script_text: str, **env: str) -> subprocess.Popen:
    script = fakes / "job.sbatch"
    script.write_text(script_text)
    full = {"PATH": f"{fakes / 'bin'}:/usr/bin:/bin", "FAKE_LOG": str(fakes / "log"),
            "SLURM_JOB_ID": "42", "SLURM_JOB_NAME": "job", "SLURM_NTASKS": "2",
            "SLURM_NTASKS_HET_GROUP_0": "1", "SLURM_NTASKS_HET_GROUP_1": "2",
            "HPCRL_CMD": "fake-hpcrl", "FAKE_STEPS": "0", "TMPDIR": str(fakes / "tmp"),
            **env}
    return subprocess.Popen(["bash", str(script)], env=full, cwd=fakes,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def signal_when_ready(fakes: Path, job: subprocess.Popen, sig: int) -> None:
    deadline = time.monotonic() + 20
    while not (fakes / "log" / "ready").exists():
        assert job.poll() is None, job.communicate()[0]
        assert time.monotonic() < deadline, "the step never started"
        time.sleep(0.05)
    job.send_signal(sig)


def finish(job: subprocess.Popen) -> tuple[int, str]:
    out, _ = job.communicate(timeout=30)
    return job.returncode, out


def logged(fakes: Path, name: str) -> list[str]:
    path = fakes / "log" / name
    return path.read_text().splitlines() if path.exists() else []


def test_first_start_trains_the_config_in_the_run_dir(fakes):
    job = start(fakes, template_path("sync").read_text(), CONFIG="my.yaml", RUN_DIR="runs/r",
                HPCRL_SET="seed=3 algo.lr=1e-3", HPCRL_SETUP="export FROM_SETUP=yes")
    status, out = finish(job)
    assert status == 0, out
    assert logged(fakes, "args") == [
        "train", "my.yaml", "--run-dir", "runs/r", "--set", "seed=3", "--set", "algo.lr=1e-3",
        "--set", "scheme.preset=ddppo", "--set", "scheme.gradient_workers=2",
        "--set", "scheme.collectors_per_worker=0"]
    assert logged(fakes, "setup") == ["yes"]
    # no HPCRL_LAUNCH: srun with the plugin `hpcrl slurm launcher` names
    assert logged(fakes, "launcher")[0].startswith("--mpi=fake --kill-on-bad-exit=1 "
                                                   "--cpus-per-task=1 ")
    assert logged(fakes, "scontrol") == []


@pytest.mark.parametrize("name", TEMPLATE_NAMES)
def test_warning_signal_is_forwarded_and_the_job_requeued(fakes, name):
    job = start(fakes, template_path(name).read_text(), FAKE_STEPS=LONG)
    signal_when_ready(fakes, job, signal.SIGUSR1)
    status, out = finish(job)
    assert logged(fakes, "signals") == ["USR1"], out
    assert logged(fakes, "scontrol") == ["requeue 42"]
    assert status == 0 and "requeueing job 42" in out


@pytest.mark.parametrize("name", TEMPLATE_NAMES)
def test_a_stop_for_lost_collectors_requeues_the_job_whole(fakes, name):
    # scheme.min_collectors: no signal came, the marker says why the step stopped
    status, out = finish(start(fakes, template_path(name).read_text(), FAKE_LOST="1"))
    assert logged(fakes, "scontrol") == ["requeue 42"], out
    assert status == 0 and "requeueing job 42" in out
    status, out = finish(start(fakes, template_path(name).read_text(), FAKE_LOST="1",
                               HPCRL_REQUEUE="0"))
    assert status == 3 and logged(fakes, "scontrol") == ["requeue 42"], out


def test_a_task_of_a_job_array_requeues_itself_not_the_array(fakes):
    # Slurm gives a task the array's id as SLURM_JOB_ID; requeueing that requeues every task
    job = start(fakes, template_path("sync").read_text(), FAKE_STEPS=LONG,
                SLURM_ARRAY_JOB_ID="42", SLURM_ARRAY_TASK_ID="3")
    signal_when_ready(fakes, job, signal.SIGUSR1)
    status, out = finish(job)
    assert logged(fakes, "scontrol") == ["requeue 42_3"], out
    assert status == 0 and "requeueing job 42_3" in out


def test_a_run_dir_that_holds_a_checkpoint_resumes(fakes):
    # a job sent again to a run directory that holds a run (a sweep's point) resumes it
    (fakes / "run" / "checkpoints").mkdir(parents=True)
    (fakes / "run" / "checkpoints" / "last.pt").write_bytes(b"")
    status, out = finish(start(fakes, template_path("sync").read_text(), CONFIG="my.yaml",
                               RUN_DIR=str(fakes / "run")))
    assert status == 0, out
    assert logged(fakes, "args") == ["train", "--resume", str(fakes / "run")]


def test_a_checkpointed_stop_requeues_even_when_srun_killed_the_last_ranks(fakes):
    # the first rank out exits 3 and srun --kill-on-bad-exit ends the rest: the step says 143
    job = start(fakes, template_path("sync").read_text(), FAKE_STEPS=LONG,
                FAKE_STOP_EXIT="143")
    signal_when_ready(fakes, job, signal.SIGUSR1)
    status, out = finish(job)
    assert logged(fakes, "scontrol") == ["requeue 42"], out
    assert status == 0 and "requeueing job 42" in out


def test_no_requeue_without_the_marker_of_this_step(fakes):
    stale = fakes / "runs" / "job-42" / "stopped"  # left by an earlier stop of the run
    stale.parent.mkdir(parents=True)
    stale.touch()
    job = start(fakes, template_path("sync").read_text(), FAKE_STEPS=LONG,
                FAKE_STOP_EXIT="143", FAKE_NO_MARKER="1")
    signal_when_ready(fakes, job, signal.SIGUSR1)
    status, out = finish(job)
    assert status == 143 and logged(fakes, "scontrol") == [], out
    assert not stale.exists()


def test_sigterm_stops_the_step_but_never_requeues(fakes):
    job = start(fakes, template_path("central").read_text(), FAKE_STEPS=LONG)
    signal_when_ready(fakes, job, signal.SIGTERM)
    status, out = finish(job)
    assert logged(fakes, "signals") == ["TERM"] and status == 3, out
    assert logged(fakes, "scontrol") == []


def test_requeue_can_be_turned_off(fakes):
    job = start(fakes, template_path("sync").read_text(), HPCRL_REQUEUE="0", FAKE_STEPS=LONG)
    signal_when_ready(fakes, job, signal.SIGUSR1)
    status, out = finish(job)
    assert status == 3 and logged(fakes, "scontrol") == [], out


@pytest.mark.parametrize("name", TEMPLATE_NAMES)
def test_a_restart_resumes_the_run_dir(fakes, name):
    text = render(RenderOptions(name, run_dir=str(fakes / "run"), nodes=1, gpus_per_node=2)).text
    status, out = finish(start(fakes, text, SLURM_RESTART_COUNT="1", HPCRL_SET="seed=9"))
    assert status == 0, out
    assert logged(fakes, "args") == ["train", "--resume", str(fakes / "run")]
    # rendered without --launch: the plugin of this interpreter's MPI library (pip MPICH)
    assert logged(fakes, "launcher")[0].startswith("--mpi=pmi2 --kill-on-bad-exit=1")


EMPTY_STEP = "--nodes=1 --ntasks=1 --mpi=none true"


@pytest.mark.parametrize("name", TEMPLATE_NAMES)
@pytest.mark.parametrize("restart", ["0", "1", "2", "3"])
def test_every_other_restart_runs_an_empty_step_first(fakes, name, restart):
    # a requeued job numbers its steps from 0 again: after an empty step, the MPI step's id
    # (and its PMI-2 socket's name) is not the one the run before still tears down
    status, out = finish(start(fakes, template_path(name).read_text(),
                               SLURM_RESTART_COUNT=restart))
    assert status == 0, out
    sruns = logged(fakes, "sruns")
    assert sruns[:-1] == ([EMPTY_STEP] if int(restart) % 2 else []), sruns
    assert sruns[-1].startswith("--mpi=fake --kill-on-bad-exit=1")


def test_a_failed_step_passes_its_status_on(fakes):
    status, out = finish(start(fakes, template_path("sync").read_text(), FAKE_EXIT="7"))
    assert status == 7 and logged(fakes, "scontrol") == [], out


def test_mpirun_gets_the_task_count(fakes):
    status, out = finish(start(fakes, template_path("sync").read_text(),
                               HPCRL_LAUNCH="mpirun --bind-to none"))
    assert status == 0, out
    assert logged(fakes, "launcher")[0].startswith("--bind-to none -n 2 fake-hpcrl train")


def async_launch(fakes: Path, **env: str) -> str:
    """The launcher's arguments of the async template's job, which succeeded, under ``env``."""
    status, out = finish(start(fakes, template_path("async").read_text(), **env))
    assert status == 0, out
    return logged(fakes, "launcher")[0]


def test_async_joins_both_components_in_one_srun(fakes):
    line = async_launch(fakes, SLURM_CPUS_PER_TASK_HET_GROUP_0="4",
                        SLURM_CPUS_PER_TASK_HET_GROUP_1="2")
    assert line.startswith("--mpi=fake --kill-on-bad-exit=1 --het-group=0 --cpus-per-task=4 "
                           "fake-hpcrl")
    assert " : --het-group=1 --cpus-per-task=2 fake-hpcrl train " in line
    args = logged(fakes, "args")
    assert "scheme.gradient_workers=1" in args and "scheme.collectors_per_worker=2" in args


def test_async_on_open_mpi_runs_one_mpiexec_over_both_components(fakes):
    """HPCRL_LAUNCH='mpiexec --with-ft ulfm' (the async template's launch on Open MPI 5):
    an app context per component on its nodes and task counts, learners first, and the
    daemons started by srun in their node's component."""
    line = async_launch(fakes, HPCRL_LAUNCH="mpiexec --with-ft ulfm",
                        SLURM_NTASKS_HET_GROUP_0="2", SLURM_NTASKS_HET_GROUP_1="6",
                        SLURM_JOB_NODELIST_HET_GROUP_0="gpu1",
                        SLURM_TASKS_PER_NODE_HET_GROUP_0="2",
                        SLURM_JOB_NODELIST_HET_GROUP_1="cpu1,cpu2,cpu3",
                        SLURM_TASKS_PER_NODE_HET_GROUP_1="2(x2),2")
    assert line.startswith("--with-ft ulfm --prtemca ras ^slurm --prtemca plm ssh "
                           "--prtemca plm_ssh_agent ")
    assert " --prtemca plm_ssh_no_tree_spawn 1 --map-by slot --bind-to none " in line
    assert " --host gpu1:2 -n 2 fake-hpcrl train " in line
    assert " : --host cpu1:2,cpu2:2,cpu3:2 -n 6 fake-hpcrl train " in line
    daemons = logged(fakes, "sruns")
    assert daemons[0].startswith("--het-group=0 --nodelist=gpu1 --nodes=1 --ntasks=1 --whole "
                                 "--overlap --mpi=none --kill-on-bad-exit=0 bash -c")
    assert daemons[1].startswith("--het-group=1 --nodelist=cpu2 ")
    assert daemons[1].endswith("bash -c true daemon cpu2")
    assert not list(fakes.glob("tmp/hpcrl-srun-agent.*")), "the agent outlived the job"


def test_async_mpiexec_without_a_readable_allocation_stops_with_the_reason(fakes):
    status, out = finish(start(fakes, template_path("async").read_text(),
                               HPCRL_LAUNCH="mpiexec --with-ft ulfm",
                               SLURM_JOB_NODELIST_HET_GROUP_0="gpu1"))
    assert status == 2 and "cannot read the nodes and tasks of job component 0" in out
    assert not os.path.exists(fakes / "log" / "args")


def test_async_refuses_mpirun(fakes):
    status, out = finish(start(fakes, template_path("async").read_text(),
                               HPCRL_LAUNCH="mpirun"))
    assert status == 2 and "cannot start a heterogeneous job" in out
    assert not os.path.exists(fakes / "log" / "args")


@pytest.mark.parametrize("name", TEMPLATE_NAMES)
def test_a_step_that_fails_before_its_first_update_is_started_again(fakes, name):
    status, out = finish(start(fakes, template_path(name).read_text(), FAKE_FAIL_STARTS="1"))
    assert status == 0, out
    assert "the step failed (status 134) before its first update: starting it again (1 of " \
           "HPCRL_START_RETRIES=2)" in out
    assert len(logged(fakes, "starts")) == 2


def test_a_step_that_keeps_failing_at_start_fails_the_job_after_the_retries(fakes):
    status, out = finish(start(fakes, template_path("sync").read_text(), FAKE_FAIL_STARTS="9",
                               HPCRL_START_RETRIES="1"))
    assert status == 134 and len(logged(fakes, "starts")) == 2, out


def test_a_step_that_failed_after_it_trained_is_not_started_again(fakes):
    status, out = finish(start(fakes, template_path("sync").read_text(), FAKE_EXIT="1"))
    assert status == 1 and len(logged(fakes, "starts")) == 1, out
    assert "starting it again" not in out
