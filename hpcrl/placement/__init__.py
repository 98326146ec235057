"""Placements: where the roles run. Every run is a job of ranks (:mod:`hpcrl.placement.job_run`:
one process, or the ranks ``mpirun``/``srun`` started), whose roles are in
:mod:`hpcrl.placement.mpi`."""
