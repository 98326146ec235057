"""The local Slurm test cluster behaves the way the hpcrl job templates need.

Needs ``bash tests/slurm/cluster.sh start`` (see conftest.py for skip/CI rules).
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest
import slurmtools as st

pytestmark = pytest.mark.slurm

PYTHON = shlex.quote(sys.executable)

# Every rank writes what it sees to $OUT/rank<r>.json; an allreduce proves
# that the ranks really talk to each other (not N worlds of size 1).
RANK_PROBE = r"""
import json, os, socket, sys
from mpi4py import MPI
comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
total = comm.allreduce(rank)
nodes = comm.allgather(os.environ.get("SLURMD_NODENAME"))
info = {
    "rank": rank,
    "size": size,
    "rank_sum": total,
    "host": socket.gethostname(),
    "node": os.environ.get("SLURMD_NODENAME"),
    "all_nodes": nodes,
    "procid": os.environ.get("SLURM_PROCID"),
    "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"),
    "het_size": os.environ.get("SLURM_HET_SIZE"),
    "ntasks_het0": os.environ.get("SLURM_NTASKS_HET_GROUP_0"),
    "step_gpus": os.environ.get("SLURM_STEP_GPUS"),
}
with open(os.path.join(sys.argv[1], f"rank{rank}.json"), "w") as f:
    json.dump(info, f)
"""


def _probe_cmd(outdir: Path) -> str:
    return f"{PYTHON} -c {shlex.quote(RANK_PROBE)} {shlex.quote(str(outdir))}"


def _read_ranks(outdir: Path, expected: int) -> list[dict]:
    files = sorted(outdir.glob("rank*.json"))
    assert len(files) == expected, f"expected {expected} rank files, got {[f.name for f in files]}"
    ranks = [json.loads(f.read_text()) for f in files]
    return sorted(ranks, key=lambda r: r["rank"])


@pytest.mark.timeout(90)
def test_mpi_job_two_nodes(tmp_path: Path) -> None:
    out = tmp_path / "ranks"
    out.mkdir()
    script = st.batch_script(
        f"srun --mpi=pmi2 {_probe_cmd(out)}",
        [
            "--job-name=mpi-2x2",
            "--nodes=2",
            "--ntasks-per-node=2",
            "--gpus-per-node=2",
            "--time=2",
            f"--output={tmp_path}/slurm-%j.out",
            f"--chdir={tmp_path}",
        ],
    )
    job = st.submit(script)
    st.assert_completed(job, timeout=60)

    ranks = _read_ranks(out, 4)
    assert [r["rank"] for r in ranks] == [0, 1, 2, 3]
    assert {r["size"] for r in ranks} == {4}, "ranks did not join one MPI world"
    assert {r["rank_sum"] for r in ranks} == {0 + 1 + 2 + 3}
    assert [r["procid"] for r in ranks] == ["0", "1", "2", "3"]
    nodes = [r["node"] for r in ranks]
    assert len(set(nodes)) == 2 and nodes.count(nodes[0]) == 2, nodes
    for r in ranks:
        assert r["cuda"] is not None and len(r["cuda"].split(",")) == 2, r


@pytest.mark.timeout(90)
def test_hetjob_one_world(tmp_path: Path) -> None:
    out = tmp_path / "ranks"
    out.mkdir()
    script = st.batch_script(
        # the batch shell runs on component 0 and has its GPUs in
        # CUDA_VISIBLE_DEVICES; Slurm must not pass that on to component 1
        f"srun --het-group=0,1 --mpi=pmi2 {_probe_cmd(out)}",
        [
            "--job-name=het",
            f"--output={tmp_path}/slurm-%j.out",
            f"--chdir={tmp_path}",
            "--time=2",
            "--nodes=1 --ntasks=2 --gpus-per-task=1",
            "hetjob",
            "--nodes=1 --ntasks=2",
        ],
    )
    job = st.submit(script)
    records = st.job_records(job)
    assert len(records) == 2, f"not a hetjob: {records}"
    st.assert_completed(job, timeout=60)
    assert {r["JobState"] for r in st.job_records(job)} == {"COMPLETED"}

    ranks = _read_ranks(out, 4)
    assert [r["rank"] for r in ranks] == [0, 1, 2, 3]
    assert {r["size"] for r in ranks} == {4}, "het components are separate MPI worlds"
    assert {r["rank_sum"] for r in ranks} == {6}
    assert {r["het_size"] for r in ranks} == {"2"}
    # component 0 = the first SLURM_NTASKS_HET_GROUP_0 ranks, on its own node
    n0 = int(ranks[0]["ntasks_het0"])
    assert n0 == 2
    comp0, comp1 = ranks[:n0], ranks[n0:]
    assert len({r["node"] for r in comp0}) == 1
    assert len({r["node"] for r in comp1}) == 1
    assert comp0[0]["node"] != comp1[0]["node"]
    # --gpus-per-task=1: one GPU each on component 0, none on component 1
    assert all(r["cuda"] is not None and len(r["cuda"].split(",")) == 1 for r in comp0), comp0
    assert len({r["cuda"] for r in comp0}) == 2, "tasks share a GPU"
    assert all(r["cuda"] is None for r in comp1), comp1


REQUEUE_SCRIPT = r"""
out={out}
restarts=${{SLURM_RESTART_COUNT:-0}}
echo "start $restarts" >> "$out/events"
if [ "$restarts" -gt 0 ]; then
    echo "$SLURM_JOB_ID" > "$out/restarted"
    exit 0
fi
on_usr1() {{
    echo "usr1" >> "$out/events"
    scontrol requeue "$SLURM_JOB_ID"
    echo "requeue rc=$?" >> "$out/events"
}}
trap on_usr1 USR1
touch "$out/ready"
# a trap runs only between commands: wait on a background sleep
sleep 300 & wait $!
# requeued: Slurm kills this run; a second signal-free wait keeps it here
sleep 300 & wait $!
exit 3
"""


@pytest.mark.timeout(90)
def test_requeue_on_signal(tmp_path: Path) -> None:
    out = tmp_path / "rq"
    out.mkdir()
    script = st.batch_script(
        REQUEUE_SCRIPT.format(out=shlex.quote(str(out))),
        [
            "--job-name=requeue",
            "--requeue",
            "--signal=B:USR1@60",
            "--time=10",
            "--open-mode=append",
            f"--output={tmp_path}/slurm-%j.out",
            f"--chdir={tmp_path}",
        ],
    )
    job = st.submit(script)
    st.wait_path(out / "ready", timeout=30, job_id=job)
    # don't wait for the time limit: send the preemption warning now
    st.send_signal(job, "USR1", batch=True)
    st.wait_requeued(job, restarts=1, timeout=30)
    st.release(job, timeout=30)  # skip the ~120 s requeue delay
    st.assert_completed(job, timeout=45)

    assert (out / "restarted").read_text().strip() == job
    events = (out / "events").read_text().splitlines()
    # "requeue rc=..." may be missing: the requeue kills the shell right away
    rc_lines = [e for e in events if e.startswith("requeue rc=")]
    assert rc_lines in ([], ["requeue rc=0"]), events
    assert [e for e in events if e not in rc_lines] == ["start 0", "usr1", "start 1"], events
    assert st.restart_count(job) == 1


TIMED_SIGNAL_SCRIPT = r"""
out={out}
trap 'date +%s > "$out/usr1"; exit 0' USR1
date +%s > "$out/started"
while true; do sleep 1 & wait $!; done
"""


@pytest.mark.timeout(90)
def test_signal_before_time_limit(tmp_path: Path) -> None:
    """--signal=B:USR1@N arrives on its own (slurmctld checks every ~30 s)."""
    out = tmp_path / "sig"
    out.mkdir()
    script = st.batch_script(
        TIMED_SIGNAL_SCRIPT.format(out=shlex.quote(str(out))),
        [
            "--job-name=timed-signal",
            "--time=2",
            # due 10 s after the start; Slurm may send it up to 30 s early
            "--signal=B:USR1@110",
            f"--output={tmp_path}/slurm-%j.out",
        ],
    )
    job = st.submit(script)
    st.assert_completed(job, timeout=75)
    started = int((out / "started").read_text())
    got = int((out / "usr1").read_text())
    assert 0 <= got - started <= 45, f"USR1 {got - started} s after start"
