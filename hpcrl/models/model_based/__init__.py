"""Model-based control: a learned world model and the planners that act through it.

- :mod:`~hpcrl.models.model_based.ensemble`: an ensemble of probabilistic networks, all
  members evaluated in one batched pass;
- :mod:`~hpcrl.models.model_based.world_model`: the dynamics (and reward) model over an env's
  observation features, standardised by statistics of the replay;
- :mod:`~hpcrl.models.model_based.planners`: random shooting, the cross-entropy method, PDDM;
- :mod:`~hpcrl.models.model_based.rewards`: the reward a planner scores with (the env's own
  vectorised reward, or the learned one);
- :mod:`~hpcrl.models.model_based.policy`: the planning policy MPC publishes, and
  :mod:`~hpcrl.models.model_based.planning_engine`: a collector's planning, env by env.

The algorithm that trains the model from a replay is
:class:`~hpcrl.algorithms.mpc.model_predictive.MPC`.
"""
