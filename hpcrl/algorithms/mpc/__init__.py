"""Model-predictive control: the agent, :class:`~hpcrl.algorithms.mpc.model_predictive.MPC`, and
``algo.mpc.*`` (world model, planner), re-exported from the config's data
(:mod:`hpcrl.sections.algorithm_keys`)."""
from hpcrl.sections.algorithm_keys import MpcConfig

__all__ = ["MpcConfig"]
