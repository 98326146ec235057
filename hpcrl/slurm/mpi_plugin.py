"""Which launcher starts hpcrl's ranks as one MPI world: ``srun --mpi=PLUGIN``, or Open
MPI's own ``mpiexec --with-ft ulfm`` for the async template.

srun can only join its tasks into one world when it speaks the process-management interface
of the MPI library that mpi4py runs on: PMI-2 for MPICH and its derivatives (Intel MPI,
MVAPICH, Cray MPICH, the pip ``mpich`` wheel), PMIx for Open MPI (Open MPI 5 has no PMI-2
at all). A site whose ``MpiDefault`` is ``none`` (Slurm's own default) gives every task a
world of size 1 with plain ``srun``. ``hpcrl slurm render``/``submit`` and the unrendered
templates (through ``hpcrl slurm launcher``) read the library with
``MPI.Get_library_version()`` and pick the plugin from it.

The async template on Open MPI 5 is the exception (:func:`template_launch`): its job is meant
to outlive a lost collector, and Open MPI's fault tolerance (ULFM) works only when its own
``mpiexec --with-ft ulfm`` starts the job, never under srun's PMIx server; the template then
starts one mpiexec over both job components (docs/slurm.md).
"""
from __future__ import annotations

import functools
import re
import subprocess
import sys
from dataclasses import dataclass

# substrings of MPI_Get_library_version's text, checked in this order (Cray MPICH and
# MVAPICH also say "MPICH"; IBM Spectrum MPI is built on Open MPI)
PLUGIN_BY_LIBRARY = (("Open MPI", "pmix"), ("Spectrum MPI", "pmix"), ("MPICH", "pmi2"),
                     ("MVAPICH", "pmi2"), ("Intel(R) MPI", "pmi2"))
# reads the version without MPI_Init, so it runs anywhere (a login node, a batch shell)
ULFM_LAUNCH = "mpiexec --with-ft ulfm"  # Open MPI 5's launcher with its fault tolerance on
_READ_VERSION = ("import mpi4py; mpi4py.rc.initialize = False; mpi4py.rc.finalize = False; "
                 "from mpi4py import MPI; print(MPI.Get_library_version(), end='')")


@dataclass(frozen=True)
class LaunchChoice:
    """The srun command for hpcrl's ranks and why: ``plugin`` is None when the MPI library
    could not be read or is unknown, and ``command`` is then plain ``srun``."""

    command: str
    plugin: str | None
    reason: str
    ulfm: bool = False  # the command is Open MPI's ``mpiexec --with-ft ulfm``


def plugin_for(library_version: str) -> str | None:
    """``pmi2`` or ``pmix`` for the text of ``MPI.Get_library_version()``; None if unknown."""
    text = library_version.upper()
    for name, plugin in PLUGIN_BY_LIBRARY:
        if name.upper() in text:
            return plugin
    return None


def library_name(library_version: str) -> str:
    """The library and its version, from the first line of the version text: 'MPICH 5.0.2',
    'Open MPI v5.0.3'."""
    first = library_version.strip().splitlines()[0] if library_version.strip() else "?"
    return " ".join(w for w in first.split(",")[0].split() if w.lower() != "version:")


def has_ulfm(library_version: str) -> bool:
    """Whether the library of this ``MPI.Get_library_version()`` text is Open MPI 5 or newer,
    whose ``mpiexec --with-ft ulfm`` lets ranks outlive a dead peer."""
    found = re.search(r"Open MPI v?(\d+)\.", library_version.strip().split("\n")[0])
    return found is not None and int(found.group(1)) >= 5


@functools.cache
def mpi_library_version() -> tuple[str | None, str]:
    """(version text, '') of the MPI library mpi4py runs on, or (None, why it is unknown).

    Uses the loaded ``mpi4py.MPI`` when this process has one; otherwise asks a child
    interpreter, which reads it without initialising MPI (importing mpi4py here would run
    MPI_Init in a process that is no rank of any job)."""
    loaded = sys.modules.get("mpi4py.MPI")
    if loaded is not None:
        return loaded.Get_library_version(), ""
    try:
        done = subprocess.run([sys.executable, "-c", _READ_VERSION], capture_output=True,
                              text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as err:
        return None, f"{type(err).__name__}: {err}"
    if done.returncode != 0 or not done.stdout.strip():
        lines = (done.stderr or "no output").strip().splitlines()
        return None, f"mpi4py cannot be imported here ({lines[-1]})"
    return done.stdout, ""


def srun_launch() -> LaunchChoice:
    """``srun --mpi=PLUGIN`` for the MPI library of this interpreter's mpi4py, or plain
    ``srun`` (the site's MpiDefault) with the reason when it cannot tell."""
    version, why = mpi_library_version()
    if version is None:
        return LaunchChoice("srun", None, f"the MPI library is unknown ({why}); plain srun "
                            f"uses the site's MpiDefault")
    plugin = plugin_for(version)
    name = library_name(version)
    if plugin is None:
        return LaunchChoice("srun", None, f"no known srun plugin for '{name}'; plain srun "
                            f"uses the site's MpiDefault")
    return LaunchChoice(f"srun --mpi={plugin}", plugin,
                        f"matches {name}, the MPI library mpi4py runs on")



def template_launch(kind: str) -> LaunchChoice:
    """How a template of ``kind`` (sync, async, central) starts its ranks: srun with the
    plugin of mpi4py's MPI library (:func:`srun_launch`), except the async template on Open
    MPI 5, whose job survives a lost collector only under ``mpiexec --with-ft ulfm``."""
    choice = srun_launch()
    version = mpi_library_version()[0]
    if kind != "async" or version is None or not has_ulfm(version):
        return choice
    return LaunchChoice(ULFM_LAUNCH, choice.plugin,
                        f"{library_name(version)}, the MPI library mpi4py runs on, survives a "
                        f"lost collector only under its own mpiexec with ULFM; it starts both "
                        f"job components, its daemons started by srun", ulfm=True)
