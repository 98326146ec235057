"""Placements: where the roles run. Every run is a job of ranks (:mod:`hpcrl.placement.job_run`:
one process, or the ranks ``mpirun``/``srun`` started): each rank's role is in
:mod:`hpcrl.placement.ranks`, the families' data paths in :mod:`hpcrl.placement.wiring`,
and what only a job of several ranks needs (spares, the watch for lost ranks) in
:mod:`hpcrl.placement.mpi`."""
