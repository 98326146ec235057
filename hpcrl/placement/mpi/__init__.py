"""MPI placement: the roles of a job's ranks (collectors, inference ranks, learners, the
updater, rank 0's leader) and what carries their messages. A run, serial or not, is set up
and driven by :mod:`hpcrl.placement.job_run`."""
