"""How one rank ends the whole job with a failure status that the launcher passes on.

``MPI_Abort`` is the usual way: MPICH, Open MPI without fault tolerance and Slurm's srun
kill every rank of the job and exit non-zero. Under Open MPI's User-Level Failure
Mitigation (``mpiexec --with-ft ulfm``) it is neither: there an abort ends the calling
process alone, the other ranks go on, and the launcher counts a process ended by
``MPI_Abort`` or by a signal as no failure. Measured with Open MPI 5.0.11 (2026-12-06):

- one rank of four aborting while the others live: the others ran on until killed;
- the last live rank aborting, every other one SIGKILLed before: ``mpiexec`` returned 0;
- every rank ended by SIGKILL: ``mpiexec`` returned 0;
- a rank leaving with ``os._exit(1)``: ``mpiexec`` returned 1, whatever the others did.

So under ULFM a rank that ends the job revokes the world communicator (ULFM's
``MPIX_Comm_revoke``: every pending and later operation on it fails with ``ERR_REVOKED``
on every rank) and leaves with its status; every other rank's failure watch
(:class:`~hpcrl.comm.faults.FailureWatch`) sees the revocation within a fraction of a
second and leaves with status 1 too (:func:`leave_revoked`). No rank of a failed job then
ends in a way the launcher would count as success.
"""
from __future__ import annotations

import os
import sys
from typing import NoReturn

from hpcrl.comm._mpi import Comm, try_mpi

FAILED = 1  # the status of a job that failed (an error, a lost rank it cannot do without)


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on", "enabled")


def ulfm_enabled() -> bool:
    """Whether this process runs under Open MPI with its fault tolerance on (``mpiexec
    --with-ft ulfm`` sets ``OMPI_MCA_mpi_ft_enable``), where a dead rank does not end the
    job and ``MPI_Abort`` ends the caller alone."""
    MPI = try_mpi()
    if MPI is None or not _truthy(os.environ.get("OMPI_MCA_mpi_ft_enable")):
        return False
    return "Open MPI" in MPI.Get_library_version() and hasattr(MPI.Comm, "Revoke")


def is_revocation(exc: BaseException) -> bool:
    """Whether ``exc`` is MPI's ``ERR_REVOKED``: another rank ended the job."""
    MPI = try_mpi()
    if MPI is None or not isinstance(exc, MPI.Exception) or not hasattr(MPI, "ERR_REVOKED"):
        return False
    return exc.Get_error_class() == MPI.ERR_REVOKED


def flush_output() -> None:
    """Flush standard output and error (best effort: they may be closed or broken)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except Exception:
            pass


def end_job_now(comm: Comm, status: int = FAILED) -> NoReturn:
    """End every rank of ``comm``'s job, this one with ``status`` (non-zero).

    Under ULFM: revoke ``comm`` (the others' failure watches then leave) and exit with
    ``status``, which the launcher reports. Elsewhere: ``comm.Abort(status)``, which ends
    every rank and makes the launcher exit non-zero; should Abort return or fail, the rank
    exits with ``status`` all the same.
    """
    flush_output()
    if ulfm_enabled():
        try:
            comm.Revoke()
        except Exception:
            pass  # revoked already (by another rank), or a world of one
        os._exit(status)
    try:
        comm.Abort(status)
    finally:
        os._exit(status)


def leave_revoked() -> NoReturn:
    """Leave a job another rank ended (its world was revoked) with the failure status; that
    rank said why."""
    flush_output()
    os._exit(FAILED)
