"""Placements: where the roles run (one process here; MPI ranks in hpcrl.placement.mpi)."""
