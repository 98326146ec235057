"""What a lost collector does to a job, said before it starts (``hpcrl plan`` and the scripts
``hpcrl slurm render`` writes), as the job itself says it at start-up
(:func:`~hpcrl.comm.faults.survival_problem`).

Only asynchronous collection can go on without a collector (a synchronous learner waits for
every one), and only where the MPI library lets ranks outlive a dead peer: Open MPI 5 with
its User-Level Failure Mitigation, which Open MPI supports only when its own ``mpiexec
--with-ft ulfm`` starts the job ("Using the FT functionality in other run-time environments
is currently unsupported", Open MPI's fault-tolerance docs). A job that srun starts, as the
Slurm templates' heterogeneous jobs must be, is not one: srun's ``--kill-on-bad-exit=1``
ends the step when a task dies, and without it Open MPI's processes under srun's PMIx
server learn of no failure.
"""
from __future__ import annotations

from hpcrl.config.schema import SchemeConfig
from hpcrl.scheme.topology import spare_ranks
from hpcrl.slurm.mpi_plugin import library_name, mpi_library_version

ULFM_LAUNCH = "mpiexec --with-ft ulfm"


def lost_collector_line(s: SchemeConfig, library_version: str | None,
                        under_srun: bool = False) -> str | None:
    """What a lost collector rank does to the job of scheme ``s``, completing "if a
    collector rank dies, ...", on the MPI whose ``MPI_Get_library_version`` text is
    ``library_version`` (None: unknown), started by srun (``under_srun``) or by the MPI's
    own launcher; None for a job without collector ranks."""
    if s.collectors_per_worker == 0:  # the learners collect themselves
        return None
    if s.collection != "async":
        return "the job ends: a synchronous scheme waits for every collector"
    library = library_name(library_version) if library_version else "an unknown MPI"
    spares = spare_ranks(s)
    idle = (f" (the {spares} spare rank{'s' if spares != 1 else ''} of "
            f"scheme.max_collector_restarts {'stay' if spares != 1 else 'stays'} idle)"
            if spares else "")
    if "Open MPI" not in library:
        return (f"the job ends: {library} ends the whole job when a rank dies{idle}; Open "
                f"MPI 5 started with `{ULFM_LAUNCH}` survives it")
    if under_srun:
        return (f"the job ends: srun ends the step when a task dies, and {library}'s fault "
                f"tolerance works only under its own `{ULFM_LAUNCH}`, which cannot start a "
                f"heterogeneous job's components{idle}")
    comes_back = (f"a spare rank takes its place, {spares} time{'s' if spares != 1 else ''} "
                  f"at most (scheme.max_collector_restarts), and " if spares else "")
    return (f"under `{ULFM_LAUNCH}` the job goes on: {comes_back}it runs down to "
            f"scheme.min_collectors={s.min_collectors} live collectors; started any other way "
            f"the job ends")


def lost_collector_notes(s: SchemeConfig) -> list[str]:
    """What a lost collector does to the job of scheme ``s`` on the MPI library mpi4py runs
    on here, as the line ``hpcrl plan`` prints (the library is asked only for a scheme
    whose answer depends on it); empty for a job without collector ranks."""
    version = None
    if s.collection == "async" and s.collectors_per_worker > 0:
        version = mpi_library_version()[0]
    line = lost_collector_line(s, version)
    return [] if line is None else [f"if a collector rank dies, {line}"]
