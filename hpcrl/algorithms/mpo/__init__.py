"""MPO's ``algo.mpo.*`` (torch-free) beside its class,
:class:`~hpcrl.algorithms.mpo.maximum_a_posteriori.MPO`."""
from __future__ import annotations

from dataclasses import dataclass

from hpcrl.field_docs import doc


@dataclass
class MpoConfig:
    """MPO's trust regions and duals (``algo.mpo.*``)."""

    epsilon: float = doc("KL bound of the E-step's improved policy from the target policy "
                         "(sets the temperature's dual).", 0.1)
    epsilon_mean: float = doc("KL bound of the policy mean's move per step, per action "
                              "dimension (decoupled trust region).", 0.01)
    epsilon_std: float = doc("KL bound of the policy std's move per step, per action "
                             "dimension.", 1e-5)
    action_samples: int = doc("Actions sampled from the target policy per next state of "
                              "the batch, valued once by the target critics for the critics' "
                              "TD targets, the E-step and the M-step (the learner's main "
                              "cost: batch_size x action_samples critic rows a step).", 20)
    dual_lr: float = doc("Learning rate of the dual variables (temperature and the two "
                         "Lagrange multipliers).", 1e-2)
    init_temperature: float = doc("Initial temperature.", 1.0)
    init_alpha: float = doc("Initial Lagrange multipliers of the trust regions.", 1.0)
    n_critics: int = doc("Critics whose minimum values the sampled actions.", 2)
