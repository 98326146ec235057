"""What a lost collector does to a job, said before it starts (``hpcrl plan`` and the scripts
``hpcrl slurm render`` writes), as the job itself says it at start-up
(:func:`~hpcrl.comm.faults.survival_problem`).

Only asynchronous collection can go on without a collector (a synchronous learner waits for
every one), and only where the MPI library lets ranks outlive a dead peer: Open MPI 5 with
its User-Level Failure Mitigation, which Open MPI supports only when its own ``mpiexec
--with-ft ulfm`` starts the job ("Using the FT functionality in other run-time environments
is currently unsupported", Open MPI's fault-tolerance docs). That is how the async Slurm
template starts its job on Open MPI 5 (:func:`~hpcrl.slurm.mpi_plugin.template_launch`). A
job that srun starts is not one: srun's ``--kill-on-bad-exit=1`` ends the step when a task
dies, and without it Open MPI's processes under srun's PMIx server learn of no failure.
"""
from __future__ import annotations

import shlex

from hpcrl.scheme.topology import spare_ranks
from hpcrl.sections.schema import SchemeConfig
from hpcrl.slurm.mpi_plugin import ULFM_LAUNCH, has_ulfm, library_name, mpi_library_version

__all__ = ["ULFM_LAUNCH", "lost_collector_line", "lost_collector_notes", "starts_ulfm"]


def starts_ulfm(launch: str) -> bool:
    """Whether the launcher command ``launch`` is an ``mpiexec``/``mpirun``/``prterun``
    that turns Open MPI's fault tolerance on (``--with-ft ulfm``)."""
    words = shlex.split(launch)
    if not words or words[0].rsplit("/", 1)[-1] not in ("mpiexec", "mpirun", "prterun"):
        return False
    pairs = zip(words, [*words[1:], ""], strict=True)
    return any(w == "--with-ft=ulfm" or (w == "--with-ft" and nxt == "ulfm")
               for w, nxt in pairs)


def lost_collector_line(s: SchemeConfig, library_version: str | None,
                        launch: str | None = None) -> str | None:
    """What a lost collector rank does to the job of scheme ``s``, completing "if a
    collector rank dies, ...", on the MPI whose ``MPI_Get_library_version`` text is
    ``library_version`` (None: unknown), started by the launcher command ``launch`` (None:
    not known yet, as for ``hpcrl plan``); None for a job without collector ranks."""
    if s.collectors_per_worker == 0:  # the learners collect themselves
        return None
    if s.collection != "async":
        return "the job ends: a synchronous scheme waits for every collector"
    library = library_name(library_version) if library_version else "an unknown MPI"
    spares = spare_ranks(s)
    idle = (f" (the {spares} spare rank{'s' if spares != 1 else ''} of "
            f"scheme.max_collector_restarts {'stay' if spares != 1 else 'stays'} idle)"
            if spares else "")
    if library_version is None or not has_ulfm(library_version):
        return (f"the job ends: {library} ends the whole job when a rank dies{idle}; Open "
                f"MPI 5 started with `{ULFM_LAUNCH}` survives it")
    comes_back = (f"a spare rank takes its place, {spares} time{'s' if spares != 1 else ''} "
                  f"at most (scheme.max_collector_restarts), and " if spares else "")
    goes_on = (f"{comes_back}it runs down to scheme.min_collectors={s.min_collectors} live "
               f"collectors")
    if launch is None:
        return f"under `{ULFM_LAUNCH}` the job goes on: {goes_on}; started any other way the " \
               f"job ends"
    if starts_ulfm(launch):
        return f"the job goes on (`{ULFM_LAUNCH}`): {goes_on}"
    if shlex.split(launch)[0].rsplit("/", 1)[-1] == "srun":
        return (f"the job ends: srun ends the step when a task dies, and {library}'s fault "
                f"tolerance works only under its own `{ULFM_LAUNCH}` (the async template's "
                f"launch when --launch is left out){idle}")
    return (f"the job ends: `{launch}` starts {library} without its fault tolerance; "
            f"`{ULFM_LAUNCH}` survives it{idle}")


def lost_collector_notes(s: SchemeConfig) -> list[str]:
    """What a lost collector does to the job of scheme ``s`` on the MPI library mpi4py runs
    on here, as the line ``hpcrl plan`` prints (the library is asked only for a scheme
    whose answer depends on it); empty for a job without collector ranks."""
    version = None
    if s.collection == "async" and s.collectors_per_worker > 0:
        version = mpi_library_version()[0]
    line = lost_collector_line(s, version)
    return [] if line is None else [f"if a collector rank dies, {line}"]
