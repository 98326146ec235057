"""Helpers for tests that run jobs on the local Slurm test cluster.

The cluster comes from ``bash tests/slurm/cluster.sh start`` (4 virtual nodes
``node1..node4``, 8 CPUs and 4 fake GPUs each, no accounting).  Everything here
shells out to the Slurm client commands and never waits without a timeout:
a stuck job raises :class:`SlurmTimeout` (an ``AssertionError``, so a test
fails) instead of hanging.

Typical use::

    job = submit(script_text, "--nodes=2", f"--output={tmp_path}/%j.out")
    assert wait_job(job, timeout=60) == "COMPLETED"
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

STATE_DIR = Path(os.environ.get("HPCRL_SLURM_DIR", "/var/tmp/hpcrl-slurm"))
CLUSTER_CONF = STATE_DIR / "etc" / "slurm.conf"
CLUSTER_SH = Path(__file__).resolve().with_name("cluster.sh")
START_HINT = "start it with: bash tests/slurm/cluster.sh start"
NODE_COUNT = 4

#: states after which a job does nothing more (unless requeued by hand)
TERMINAL_STATES = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "PREEMPTED",
        "OUT_OF_MEMORY",
        "BOOT_FAIL",
        "DEADLINE",
        "SPECIAL_EXIT",
        "REVOKED",
    }
)

#: job ids submitted through :func:`submit`, cancelled by :func:`cancel_submitted`
SUBMITTED: list[str] = []


class SlurmError(RuntimeError):
    """A Slurm client command failed."""


class SlurmTimeout(AssertionError):
    """A job did not reach the expected state in time."""


# --------------------------------------------------------------------- commands


def slurm_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for Slurm client commands.

    Drops job variables inherited from an enclosing allocation (they would
    leak into sbatch/srun) and points ``SLURM_CONF`` at the test cluster when
    the caller did not choose one.
    """
    env = {
        k: v
        for k, v in os.environ.items()
        if not (k.startswith("SLURM_") and k != "SLURM_CONF")
    }
    if "SLURM_CONF" not in env and CLUSTER_CONF.exists():
        env["SLURM_CONF"] = str(CLUSTER_CONF)
    if extra:
        env.update(extra)
    return env


def run(
    *cmd: str,
    timeout: float = 30,
    check: bool = True,
    input: str | None = None,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run one client command; raise :class:`SlurmError` on failure if ``check``."""
    try:
        proc = subprocess.run(
            list(cmd),
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=slurm_env(env),
        )
    except subprocess.TimeoutExpired as exc:
        raise SlurmError(f"{' '.join(cmd)}: no answer within {timeout} s") from exc
    except FileNotFoundError as exc:
        raise SlurmError(f"{cmd[0]}: not installed ({START_HINT})") from exc
    if check and proc.returncode != 0:
        raise SlurmError(
            f"{' '.join(cmd)} exited {proc.returncode}: "
            f"{(proc.stderr or proc.stdout).strip()}"
        )
    return proc


def cluster_available() -> tuple[bool, str]:
    """(True, "") when the controller answers and all nodes can take jobs."""
    if shutil.which("scontrol") is None:
        return False, "Slurm is not installed (no scontrol on PATH)"
    try:
        ping = run("scontrol", "ping", timeout=15, check=False)
    except SlurmError as exc:
        return False, f"Slurm test cluster does not answer: {exc}"
    if ping.returncode != 0 or " is UP" not in ping.stdout:
        detail = (ping.stdout + ping.stderr).strip().splitlines()
        return False, "Slurm test cluster does not answer (scontrol ping: " + (
            detail[0] if detail else f"rc {ping.returncode}"
        ) + ")"
    states = node_states()
    usable = [n for n, s in states.items() if s.rstrip("*").split("+")[0] in
              {"idle", "mixed", "allocated", "completing"}]
    if len(usable) < NODE_COUNT:
        return False, f"Slurm test cluster has only {len(usable)} usable nodes: {states}"
    return True, ""


def node_states() -> dict[str, str]:
    """{node name: sinfo state}, e.g. ``{"node1": "idle", ...}``."""
    out = run("sinfo", "-h", "-N", "-o", "%N %T", check=False).stdout
    states: dict[str, str] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2:
            states[parts[0]] = parts[1]
    return states


# ------------------------------------------------------------------------ jobs


def _is_script_text(script: str | os.PathLike[str]) -> bool:
    if isinstance(script, os.PathLike):
        return False
    return "\n" in script or script.startswith("#!")


def submit(
    script: str | os.PathLike[str],
    *sbatch_args: str,
    env: Mapping[str, str] | None = None,
    timeout: float = 30,
) -> str:
    """Submit a batch job and return its id (the leader's id for a hetjob).

    ``script`` is either the script text (anything with a newline or a
    ``#!`` line) or a path to a script file.  ``sbatch_args`` go before the
    script, e.g. ``"--nodes=2", "--output=/tmp/x/%j.out"``.
    """
    cmd = ["sbatch", "--parsable", *sbatch_args]
    text = None
    if _is_script_text(script):
        text = str(script)  # sbatch reads the script from stdin
    else:
        cmd.append(os.fspath(script))
    out = run(*cmd, input=text, env=env, timeout=timeout).stdout.strip()
    # "--parsable" prints "jobid" or "jobid;cluster"
    job_id = out.splitlines()[-1].split(";")[0].strip() if out else ""
    if not job_id.isdigit():
        raise SlurmError(f"sbatch printed no job id: {out!r}")
    SUBMITTED.append(job_id)
    return job_id


_FIELD = re.compile(r"(?:^|\s)([A-Za-z][\w:/.()-]*)=")


def _parse_record(line: str) -> dict[str, str]:
    """Parse one ``scontrol show -o`` line (values may contain spaces)."""
    matches = list(_FIELD.finditer(line))
    record: dict[str, str] = {}
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(line)
        record.setdefault(m.group(1), line[m.end():end].strip())
    return record


def job_records(job_id: str) -> list[dict[str, str]]:
    """All records of a job from ``scontrol show job -o`` (one per hetjob component).

    Empty when Slurm does not know the job (anymore).
    """
    proc = run("scontrol", "show", "job", "-o", str(job_id), check=False)
    if proc.returncode != 0:
        if "Invalid job id" in proc.stderr:
            return []
        raise SlurmError(f"scontrol show job {job_id}: {proc.stderr.strip()}")
    return [_parse_record(line) for line in proc.stdout.splitlines() if line.strip()]


def job_info(job_id: str) -> dict[str, str]:
    """The job's (for a hetjob: the leader's) ``scontrol show job`` fields."""
    records = job_records(job_id)
    if not records:
        raise SlurmError(f"job {job_id} is unknown to Slurm")
    for rec in records:
        if rec.get("JobId") == str(job_id):
            return rec
    return records[0]


def job_state(job_id: str) -> str:
    """``JobState`` of the job, ``"UNKNOWN"`` when Slurm forgot it.

    For a hetjob this is the first non-terminal component state, so the job
    counts as finished only when all its components are.
    """
    records = job_records(job_id)
    if not records:
        return "UNKNOWN"
    states = [r.get("JobState", "UNKNOWN") for r in records]
    for s in states:
        if s not in TERMINAL_STATES:
            return s
    leader = job_info(job_id).get("JobState", states[0])
    return leader


def _describe(job_id: str) -> str:
    try:
        rec = job_info(job_id)
    except SlurmError as exc:
        return str(exc)
    keys = ("JobState", "Reason", "Restarts", "ExitCode", "StartTime", "NodeList", "StdOut")
    text = " ".join(f"{k}={rec.get(k)}" for k in keys)
    out = rec.get("StdOut")
    if out and os.path.isfile(out):
        tail = Path(out).read_text(errors="replace")[-2000:]
        text += f"\n--- {out} (tail) ---\n{tail}"
    return text


def wait_state(
    job_id: str,
    states: Iterable[str],
    timeout: float = 60,
    poll: float = 0.5,
    what: str | None = None,
) -> str:
    """Poll until the job is in one of ``states``; return that state."""
    wanted = set(states)
    what = what or f"not in {sorted(wanted)}"
    deadline = time.monotonic() + timeout
    state = job_state(job_id)
    while state not in wanted:
        if time.monotonic() > deadline:
            raise SlurmTimeout(
                f"job {job_id} {what} after {timeout} s: {_describe(job_id)}"
            )
        time.sleep(poll)
        state = job_state(job_id)
    return state


def wait_job(job_id: str, timeout: float = 60, poll: float = 0.5) -> str:
    """Wait until the job has finished (all hetjob components); return its final state."""
    return wait_state(
        job_id, TERMINAL_STATES | {"UNKNOWN"}, timeout=timeout, poll=poll, what="not finished"
    )


def assert_completed(job_id: str, timeout: float = 60) -> None:
    """Wait for the job and fail with its state and output unless it COMPLETED."""
    state = wait_job(job_id, timeout=timeout)
    if state != "COMPLETED":
        raise AssertionError(f"job {job_id} ended {state}: {_describe(job_id)}")


def wait_running(job_id: str, timeout: float = 60) -> None:
    """Wait until the job runs; fail early if it ends first."""
    state = wait_state(
        job_id, TERMINAL_STATES | {"RUNNING", "UNKNOWN"}, timeout=timeout, what="not running"
    )
    if state != "RUNNING":
        raise AssertionError(f"job {job_id} ended {state} before running: {_describe(job_id)}")


def wait_path(path: str | os.PathLike[str], timeout: float = 30, job_id: str | None = None) -> Path:
    """Wait for a file the job writes (e.g. a 'ready' marker)."""
    p = Path(path)
    deadline = time.monotonic() + timeout
    while not p.exists():
        if job_id is not None and job_state(job_id) in TERMINAL_STATES:
            if p.exists():
                break
            raise AssertionError(f"job {job_id} ended without writing {p}: {_describe(job_id)}")
        if time.monotonic() > deadline:
            extra = f": {_describe(job_id)}" if job_id else ""
            raise SlurmTimeout(f"{p} did not appear within {timeout} s{extra}")
        time.sleep(0.2)
    return p


# ---------------------------------------------------------- preemption / requeue


def release(job_id: str, timeout: float = 30) -> None:
    """Let a requeued (or otherwise begin-time held) job start now.

    A requeued job waits ~120 s as PENDING with Reason=BeginTime.  Call this
    right after triggering the requeue: it waits until the job is PENDING
    (a requeue passes through COMPLETING), runs
    ``scontrol update jobid=J StartTime=now`` and repeats until the
    begin-time hold is gone.  Fails if the job ends without having pended.
    """
    deadline = time.monotonic() + timeout
    updated = False
    while True:
        rec = job_info(job_id)
        state, reason = rec.get("JobState"), rec.get("Reason")
        if state == "PENDING":
            if updated and reason != "BeginTime":
                return
            if not updated:
                # a start in the same second as the last run's end finds the job credential
                # revoked ("non-startable batch job"): let that second pass first
                time.sleep(1.5)
            run("scontrol", "update", f"jobid={job_id}", "StartTime=now")
            updated = True
            continue
        if updated:
            return  # it left PENDING after the update: started (or finished)
        if state in TERMINAL_STATES:
            raise AssertionError(f"job {job_id} ended, nothing to release: {_describe(job_id)}")
        if time.monotonic() > deadline:
            raise SlurmTimeout(f"job {job_id} did not pend within {timeout} s: {_describe(job_id)}")
        time.sleep(0.2)


def wait_requeued(job_id: str, restarts: int = 1, timeout: float = 60) -> None:
    """Wait until the job has been requeued ``restarts`` times (``Restarts=``)."""
    deadline = time.monotonic() + timeout
    while restart_count(job_id) < restarts:
        if job_state(job_id) in TERMINAL_STATES:
            raise AssertionError(f"job {job_id} ended without requeue: {_describe(job_id)}")
        if time.monotonic() > deadline:
            raise SlurmTimeout(
                f"job {job_id} not requeued {restarts}x within {timeout} s: {_describe(job_id)}"
            )
        time.sleep(0.2)


def requeue(job_id: str, hold: bool = False) -> None:
    """``scontrol requeue`` (or ``requeuehold``) a running or finished batch job."""
    run("scontrol", "requeuehold" if hold else "requeue", str(job_id))


def send_signal(job_id: str, sig: str = "USR1", batch: bool = True, full: bool = False) -> None:
    """Send a signal now instead of waiting for ``--signal=...@time``.

    ``batch=True`` signals only the batch shell (like ``--signal=B:``),
    ``full=True`` the batch shell and all steps, neither: the job steps only.
    """
    cmd = ["scancel", f"--signal={sig}"]
    if full:
        cmd.append("--full")
    elif batch:
        cmd.append("--batch")
    run(*cmd, str(job_id))


def cancel(job_id: str) -> None:
    run("scancel", str(job_id), check=False)


def hold(job_id: str) -> None:
    run("scontrol", "hold", str(job_id))


def restart_count(job_id: str) -> int:
    return int(job_info(job_id).get("Restarts", "0") or 0)


def cancel_alive(job_ids: Iterable[str], timeout: float = 20) -> list[str]:
    """Cancel those of ``job_ids`` that have not finished; wait (bounded) until they have."""
    done = TERMINAL_STATES | {"UNKNOWN"}
    alive = [j for j in job_ids if job_state(j) not in done]
    for j in alive:
        cancel(j)
    deadline = time.monotonic() + timeout
    for j in alive:
        while job_state(j) not in done and time.monotonic() < deadline:
            time.sleep(0.3)
    return alive


def cancel_submitted(timeout: float = 20) -> list[str]:
    """Cancel every job :func:`submit` started that is still alive; return their ids."""
    alive = cancel_alive(list(SUBMITTED), timeout=timeout)
    SUBMITTED.clear()
    return alive


def batch_script(body: str, directives: Sequence[str] = (), shell: str = "/bin/bash") -> str:
    """Build a batch script: ``#SBATCH`` lines from ``directives`` then ``body``.

    A directive ``"hetjob"`` separates hetjob components.
    """
    lines = [f"#!{shell}"]
    lines += [f"#SBATCH {d}" for d in directives]
    return "\n".join(lines) + "\n" + body.strip("\n") + "\n"


def stop_mid_run_and_requeue(task: str, progress: Callable[[], int], rows: int,
                             timeout: float = 90) -> None:
    """Once ``progress()`` counts ``rows`` (mid-run), send ``task`` the template's warning
    signal (USR1 to its batch shell, as --signal=B:USR1@90 does), wait for its requeue and
    release it."""
    deadline = time.monotonic() + timeout
    while progress() < rows:
        assert job_state(task) == "RUNNING", f"{task} ended before the signal"
        assert time.monotonic() < deadline, f"no progress of {task} within {timeout:.0f} s"
        time.sleep(0.1)
    send_signal(task, "USR1", batch=True)
    wait_requeued(task, restarts=1, timeout=90)
    time.sleep(2)  # slurmd refuses a start within the second of the last run's end
    release(task, timeout=60)
