"""The built-in algorithms' own sections: the dataclasses of ``algo.ppo``, ``algo.impala``,
``algo.dqn``, ``algo.ddpg``, ``algo.td3``, ``algo.sac``, ``algo.mpo`` and ``algo.mpc``.

They are the config's data like every other section, so they live here, below the
components: :class:`~hpcrl.sections.schema.AlgoConfig` holds one of each, and the code
that reads them (the algorithms, the models, the collectors) names them in its annotations,
so they cannot live in ``hpcrl/algorithms/`` without the data importing the algorithms
that name it. Each algorithm's folder re-exports its own (``from hpcrl.algorithms.ppo
import PpoConfig``), and its class declares it (``PPO.section_keys = PpoConfig``) beside
its defaults and key rules. A plug-in's own section needs no entry here: the loader builds
it from the class's ``section_keys``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from hpcrl.field_docs import doc

__all__ = ["DdpgConfig", "DqnConfig", "ImpalaConfig", "MpcConfig", "MpoConfig", "PpoConfig",
           "SacConfig", "Td3Config"]

@dataclass
class PpoConfig:
    """PPO's clipped surrogate and its minibatched epochs (``algo.ppo.*``)."""

    num_epochs: int = doc("Passes over each rollout.", 20)
    minibatch_size: int = doc("Samples per gradient step; must divide algo.num_steps x the "
                              "job's envs.", 256)
    clip_range: float = doc("Initial clip range of the probability ratio.", 0.2)
    clip_schedule: Literal["constant", "linear"] = doc(
        "'linear' decays the clip range to 0 over train.total_env_steps.", "linear")
    clip_range_vf: float | None = doc("Clip the value change to this range around the old "
                                      "value (null disables value clipping).", None)
    demos: str = doc(
        "PPO+D: a demonstration file (.npz, the format hpcrl eval RUN --record writes: "
        "obs, actions, rewards, terminated, truncated, one row per step, episodes back to "
        "back) whose episodes algo.ppo.demos_fraction of the job's env slots replay in every "
        "rollout, beside the agent's own best episodes (algo.ppo.demos_own). Empty: none.", "")
    demos_fraction: float = doc(
        "PPO+D: the fraction of the job's env slots that replay demonstrations instead of "
        "stepping an env (fixed slots, spread over the global env indices; every collector "
        "keeps at least one real env).", 0.25)
    demos_own: int = doc(
        "PPO+D: how many of the agent's own episodes the replay keeps beside the "
        "demonstrations: an episode joins when its return is at least the lowest of the "
        "demonstrations', evicting the worst own one (per collector; 0: none).", 8)


@dataclass
class ImpalaConfig:
    """IMPALA's V-trace clips (``algo.impala.*``)."""

    clip_rho: float | None = doc(
        "V-trace rho-bar, the clip of the importance weights in the TD errors and "
        "policy-gradient advantages (null: no clip).", 1.0)
    clip_c: float | None = doc("V-trace c-bar, the clip of the trace coefficients (null: no "
                               "clip).", 1.0)


@dataclass
class DqnConfig:
    """DQN's target and epsilon-greedy exploration (``algo.dqn.*``); a plug-in that derives
    from ``hpcrl.OffPolicyAlgorithm`` with discrete actions explores with these too.
    Defaults: RL-zoo's CartPole recipe."""

    double_q: bool = doc("Pick the next action with the online network and value it with the "
                         "target network (double Q-learning).", False)
    exploration_initial_eps: float = doc("Initial probability of a random action.", 1.0)
    exploration_final_eps: float = doc("Final probability of a random action.", 0.04)
    exploration_fraction: float = doc("Fraction of train.total_env_steps over which the "
                                      "random-action probability decays linearly.", 0.16)
    per_collector_eps: bool = doc(
        "On collector ranks (Ape-X): collector i of N acts with the fixed epsilon "
        "collector_eps_base ** (1 + collector_eps_alpha * i / (N - 1)) instead of the "
        "decaying schedule, so the collectors explore from a lot to hardly at all.", False)
    collector_eps_base: float = doc("Ape-X epsilon schedule: the base epsilon.", 0.4)
    collector_eps_alpha: float = doc("Ape-X epsilon schedule: the exponent's spread.", 7.0)
    initial_priorities: Literal["max", "collector"] = doc(
        "Prioritised replay: the priority of a new transition. 'max': the largest seen so "
        "far (replayed soon, Schaul et al.); 'collector': its |n-step TD error| computed by "
        "the collector with its copy of the Q-network (Ape-X).", "max")


@dataclass
class DdpgConfig:
    """DDPG's exploration noise (``algo.ddpg.*``; TD3's section adds its own keys)."""

    action_noise: Literal["none", "gaussian", "ornstein_uhlenbeck"] = doc(
        "Exploration noise added to the deterministic action ('ornstein_uhlenbeck' is "
        "temporally correlated, reset at episode ends).", "gaussian")
    noise_std: float = doc("Std of the exploration noise, in units of half the action range "
                           "(actions live in [-1, 1] before scaling).", 0.1)
    ou_theta: float = doc("Ornstein-Uhlenbeck noise: rate of mean reversion.", 0.15)
    ou_dt: float = doc("Ornstein-Uhlenbeck noise: time step.", 1e-2)


@dataclass
class Td3Config(DdpgConfig):
    """TD3's exploration noise, policy delay, target smoothing and twin critics
    (``algo.td3.*``)."""

    policy_delay: int = doc("Critic gradient steps per policy (and target) update.", 2)
    target_policy_noise: float = doc("Std of the noise on the target policy's action (target "
                                     "policy smoothing).", 0.2)
    target_noise_clip: float = doc("Clip of the target policy noise.", 0.5)
    n_critics: int = doc("Critics whose minimum makes the target.", 2)


@dataclass
class SacConfig:
    """SAC's critics and entropy temperature (``algo.sac.*``)."""

    n_critics: int = doc("Critics whose minimum makes the target.", 2)
    learn_ent_coef: bool = doc("Learn the entropy temperature so the policy's entropy tracks "
                               "target_entropy (automatic temperature).", True)
    ent_coef_init: float = doc("Initial (or, without learn_ent_coef, fixed) entropy "
                               "temperature.", 1.0)
    target_entropy: float | None = doc("Entropy the temperature aims at; null uses -(action "
                                       "dimensions).", None)


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
