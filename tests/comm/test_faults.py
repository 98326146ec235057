"""What a rank knows of lost ranks (hpcrl.comm.faults), in one process."""
from __future__ import annotations

import pytest

from hpcrl.comm import faults, job_end
from hpcrl.comm.faults import LOST, LostRanks, record_exit, survival_problem


def test_mpich_says_it_cannot_survive_a_lost_rank_and_what_can():
    problem = survival_problem()  # the test extra's MPI is pip MPICH
    assert problem is not None and problem.startswith("MPICH Version: ")
    assert "ends the whole job when a rank dies" in problem
    assert "Open MPI 5 started with `mpiexec --with-ft ulfm` survives" in problem


class FakeOpenMPI:
    """What hpcrl asks of mpi4py's MPI module, as Open MPI 5 with ULFM answers."""

    THREAD_MULTIPLE = 3

    class Comm:
        def Revoke(self):  # noqa: N802
            pass

    @staticmethod
    def Get_library_version():  # noqa: N802
        return "Open MPI v5.0.11, package: Open MPI\n"

    @staticmethod
    def Query_thread():  # noqa: N802
        return 3


def test_open_mpi_needs_its_fault_tolerance_on(monkeypatch):
    FakeMPI = FakeOpenMPI
    monkeypatch.setattr(faults, "try_mpi", lambda: FakeMPI)
    monkeypatch.setattr(job_end, "try_mpi", lambda: FakeMPI)
    monkeypatch.delenv("OMPI_MCA_mpi_ft_enable", raising=False)
    assert "started without its fault tolerance: launch with `mpiexec --with-ft ulfm`" in (
        survival_problem() or "")
    monkeypatch.setenv("OMPI_MCA_mpi_ft_enable", "1")
    assert survival_problem() is None
    monkeypatch.setattr(FakeMPI, "Query_thread", staticmethod(lambda: 1))
    assert "MPI_THREAD_MULTIPLE" in (survival_problem() or "")


def test_lost_ranks_are_recorded_once_with_why():
    lost = LostRanks()
    assert lost.mark(3, "dead") and not lost.mark(3, "sent nothing")
    assert 3 in lost and 2 not in lost and lost.why(3) == "dead"
    assert lost.ranks() == {3}
    lost.clear()
    assert lost.ranks() == set() and not lost.enabled
    assert LOST.ranks() == set()  # no job in this process lost anything


@pytest.mark.parametrize("code, status", [(None, 0), (3, 3), ("bad config", 1)])
def test_the_exit_status_a_rank_leaves_with(code, status):
    record_exit(code)
    assert faults.EXIT_CODE.code == status
    record_exit(0)


class Ended(Exception):
    """os._exit, in a test: the status the process would have left with."""


class RecordingComm:
    """A world communicator that records how it was told to end the job."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def Revoke(self):  # noqa: N802
        self.calls.append("revoke")

    def Abort(self, status):  # noqa: N802
        self.calls.append(f"abort {status}")


def _exit_raises(monkeypatch):
    def leave(status):
        raise Ended(status)

    monkeypatch.setattr(job_end.os, "_exit", leave)


@pytest.mark.parametrize("ulfm", [False, True])
def test_a_rank_ends_the_job_by_abort_or_under_ulfm_by_revocation(monkeypatch, ulfm):
    """MPI_Abort under ULFM ends the caller alone and the launcher may report success, so a
    rank there revokes the world and exits with the failure status itself."""
    monkeypatch.setattr(job_end, "try_mpi", lambda: FakeOpenMPI)
    if ulfm:
        monkeypatch.setenv("OMPI_MCA_mpi_ft_enable", "1")
    else:
        monkeypatch.delenv("OMPI_MCA_mpi_ft_enable", raising=False)
    _exit_raises(monkeypatch)
    comm = RecordingComm()
    with pytest.raises(Ended) as ended:
        job_end.end_job_now(comm, 1)
    assert ended.value.args == (1,)
    assert comm.calls == (["revoke"] if ulfm else ["abort 1"])


def test_a_revoked_world_is_no_lost_peer_and_ends_the_rank_quietly(monkeypatch, capsys):
    """ERR_REVOKED means another rank ended the job and said why: this rank leaves with
    status 1 without a traceback of its own, and marks no collector lost."""
    class FakeException(Exception):
        def __init__(self, error_class):
            self.error_class = error_class

        def Get_error_class(self):  # noqa: N802
            return self.error_class

    class FakeMPI(FakeOpenMPI):
        Exception = FakeException
        ERR_REVOKED, ERR_PROC_FAILED = 77, 75

    monkeypatch.setattr(job_end, "try_mpi", lambda: FakeMPI)
    monkeypatch.setattr(faults, "try_mpi", lambda: FakeMPI)
    revoked, dead = FakeException(77), FakeException(75)
    assert job_end.is_revocation(revoked) and not job_end.is_revocation(dead)
    assert faults.is_peer_failure(dead) and not faults.is_peer_failure(revoked)
    _exit_raises(monkeypatch)
    from hpcrl.comm import abort

    with pytest.raises(Ended) as ended:
        abort.report_and_abort(RecordingComm(), lambda: "collector", revoked, None)
    assert ended.value.args == (1,)
    assert capsys.readouterr().err == ""
