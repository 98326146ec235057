"""The role of each rank of a job, one process or many: collectors, inference ranks,
learners, the updater, and what every learner shares with rank 0's leader."""
