"""The learner, whatever runs it: one loop per update (:mod:`~hpcrl.learning.loop`), the
off-policy learner's replay-ratio rule (:mod:`~hpcrl.learning.replay_loop`) and what a run
writes (:mod:`~hpcrl.learning.run_writer`, :mod:`~hpcrl.learning.periodic_eval`,
:mod:`~hpcrl.learning.eval_curve`).

Nothing here knows a transport: a serial run and the learner ranks of an MPI job
(:mod:`hpcrl.placement`) run these same modules, reaching other processes only through what
they are handed (a :class:`~hpcrl.comm.channel.Channel`, collectives over a communicator).
"""
from hpcrl.learning.loop import Learner, UpdateControl, WriterControl, run_learner

__all__ = ["Learner", "WriterControl", "UpdateControl", "run_learner"]
