"""What a rank knows of lost ranks (hpcrl.comm.faults), in one process."""
from __future__ import annotations

import pytest

from hpcrl.comm import faults
from hpcrl.comm.faults import LOST, LostRanks, record_exit, survival_problem


def test_mpich_says_it_cannot_survive_a_lost_rank_and_what_can():
    problem = survival_problem()  # the test extra's MPI is pip MPICH
    assert problem is not None and problem.startswith("MPICH Version: ")
    assert "ends the whole job when a rank dies" in problem
    assert "Open MPI 5 started with `mpiexec --with-ft ulfm` survives" in problem


def test_open_mpi_needs_its_fault_tolerance_on(monkeypatch):
    class FakeMPI:
        THREAD_MULTIPLE = 3

        @staticmethod
        def Get_library_version():  # noqa: N802
            return "Open MPI v5.0.11, package: Open MPI\n"

        @staticmethod
        def Query_thread():  # noqa: N802
            return 3

    monkeypatch.setattr(faults, "try_mpi", lambda: FakeMPI)
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
