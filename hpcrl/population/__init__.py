"""Population-based training (PBT) with no server: members exchange through files.

Each member is its own process (a Slurm array task, a group of ranks of one ``mpiexec``, a
local process) and every ``pbt.interval_env_steps`` calls :meth:`Member.step
<hpcrl.population.member.Member.step>`: it publishes its scored snapshot to
``RUN_DIR/population/`` (:mod:`~hpcrl.population.workspace`), ranks itself against the peers
with equal or less experience (:mod:`~hpcrl.population.exploit`), and a member of the bottom
quantile copies a leader's checkpoint and mutates its hyperparameters
(:mod:`~hpcrl.population.explore`), the copy recorded in ``population/lineage.csv``
(:mod:`~hpcrl.population.lineage`). What a population is asked to do is
:class:`~hpcrl.sections.pbt_section.PbtConfig`.

The design is DexPBT's (serverless: no driver to keep alive, a lost or late member stops no
other), with Ray Tune's defaults and Sample Factory's gap thresholds. The package uses only
the standard library (no torch): it copies checkpoint files as bytes, and the training loop
loads them.
"""
