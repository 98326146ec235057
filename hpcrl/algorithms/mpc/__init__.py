"""Model-predictive control: ``algo.mpc.*`` (world model, planner; torch-free) here, the
agent in :class:`~hpcrl.algorithms.mpc.model_predictive.MPC`."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from hpcrl.field_docs import doc


@dataclass
class MpcConfig:
    """Model-predictive control's world model and planner (``algo.mpc.*``). The model's
    network and training take the shared keys: ``actor.hidden_sizes`` and
    ``actor.activation`` (each member's layers), ``algo.lr`` (its learning rate),
    ``replay.batch_size`` and ``replay.gradient_steps`` per ``replay.train_freq`` steps
    (its training steps); ``algo.gamma`` discounts the planned rewards."""

    planner: Literal["rs", "cem", "pddm"] = doc(
        "How each env step's action is planned over the model: 'rs' (random shooting: the "
        "best of algo.mpc.candidates uniform action sequences), 'cem' (the cross-entropy "
        "method: algo.mpc.iterations refits of a Gaussian over sequences to its "
        "algo.mpc.elites best candidates, warm-started from the last step's plan, PETS), "
        "'pddm' (Nagabandi et al. 2019: time-correlated noise, filtered by algo.mpc.beta, on "
        "a mean sequence reweighted by exp(algo.mpc.gamma x return), shifted between steps).",
        "cem")
    ensemble_size: int = doc("Members of the probabilistic dynamics ensemble: each predicts "
                             "a Gaussian over the change of the observation (and the reward, "
                             "where it is learned) and trains on its own bootstrap of every "
                             "batch; a candidate's return is the mean over the members.", 5)
    horizon: int = doc("Env steps each candidate action sequence plans ahead (PETS's 25: "
                       "a pendulum swing-up needs about that many).", 25)
    candidates: int = doc("Action sequences evaluated per planning iteration, each under "
                          "every ensemble member, in one batched pass per horizon step.", 200)
    iterations: int = doc("Planning iterations per env step (cem, pddm): each samples "
                          "algo.mpc.candidates sequences around the current mean.", 3)
    elites: int = doc("cem: the best candidates the Gaussian is refitted to.", 20)
    cem_alpha: float = doc("cem: weight of the previous mean and std in each refit (0 takes "
                           "the elites' own).", 0.1)
    sample_std: float = doc("Std of the sampled action noise, in units of half the action "
                            "range: cem's initial std, pddm's noise before filtering.", 0.5)
    beta: float = doc("pddm: the noise filter, n_t = beta x u_t + (1 - beta) x n_(t-1) "
                      "(1: independent noise per step; smaller: smoother sequences).", 0.6)
    gamma: float = doc("pddm: reward weighting, each candidate weighs exp(gamma x (return "
                       "- best return)) in the new mean (large: the best candidate alone).",
                       1.0)
    reward_fn: str = doc(
        "The reward the planner scores candidates with. 'auto': the env's own vectorised "
        "reward when it has one (a method planning_reward(obs, actions, next_obs) of the "
        "unwrapped env, or hpcrl's for Pendulum-v1 and MountainCarContinuous-v0), else the "
        "model's learned reward; 'learned': always the model's (any Gymnasium env); "
        "'module:function': a function of your own with that signature. It takes torch "
        "tensors [N, features] (the flattened observation of a Box space), [N, action dims] "
        "(env units) and [N, features], and returns [N] rewards.", "auto")
    weight_decay: float = doc("L2 penalty on the model's weights, added to its loss.", 0.0)
