"""Experiments over many runs, and what a run leaves to look at.

A sweep of seeds and a grid of config values (:mod:`hpcrl.experiments.sweep`) run on this
machine (:mod:`hpcrl.experiments.sweep_runner`; ``hpcrl slurm sweep`` makes a Slurm job
array of one in :mod:`hpcrl.slurm.sweep`); the summaries of a set of run directories,
grouped over seeds (:mod:`hpcrl.experiments.runs_table`), and their learning curves
(:mod:`hpcrl.experiments.plots`); videos of a trained policy
(:mod:`hpcrl.experiments.video`). The commands over them are in :mod:`hpcrl.cli`; nothing
below these two packages (``core``, ``comm``, ``roles``, ``placement``, ``runtime``,
``scheme``, ``config``) imports them.
"""
