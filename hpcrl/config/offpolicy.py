"""The config section of the off-policy algorithms: replay, training rhythm, exploration.

It lives apart from :mod:`hpcrl.config.schema` because only some algorithms read it;
``algo.*`` keys that every algorithm shares (``gamma``, ``lr``, ``lr_schedule``,
``max_grad_norm``, ``optimizer``, ``optimizer_eps``, ``num_steps``) keep their meaning.
Sensible values differ per algorithm: the shared replay keys default to the chosen
algorithm's values (:mod:`hpcrl.config.algo_defaults`, which also sets DQN's exploration
and double-Q keys); the field defaults below are SAC's, and those of keys that one algorithm
reads (TD3's policy delay, SAC's temperature) are that algorithm's.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from hpcrl.config.schema import doc


@dataclass
class ReplayConfig:
    """Replay storage, training rhythm, targets and exploration of DQN, SAC, TD3, DDPG and MPO.

    One training update (one progress row, the unit of ``train.checkpoint_every``) collects
    ``algo.num_steps`` steps of every env; within it a training round of ``gradient_steps``
    gradient steps follows every ``train_freq`` steps per env, once the job has collected
    more than ``learning_starts`` env steps.
    """

    buffer_size: int = doc("Transitions the replay holds; the oldest are overwritten.",
                           1_000_000)
    batch_size: int = doc("Transitions sampled per gradient step.", 256)
    learning_starts: int = doc("Env steps (over all envs) collected with uniformly random "
                               "actions before training starts.", 100)
    train_freq: int = doc("Steps per env between two training rounds.", 1)
    gradient_steps: int = doc("Gradient steps per training round; -1 takes one per env step "
                              "collected since the last round (train_freq x env.num_envs).", 1)
    tau: float = doc("Polyak factor of the target networks: target += tau * (online - target); "
                     "1 copies (a hard update).", 0.005)
    target_update_interval: int = doc("Gradient steps between two target-network updates "
                                      "(DQN, SAC; TD3/DDPG update targets with the policy).", 1)
    n_step: int = doc("Steps of reward summed into each stored transition (n-step returns); "
                      "an episode end shortens the window.", 1)
    prioritized: bool = doc("Prioritised replay (proportional, sum-tree) instead of uniform "
                            "sampling.", False)
    alpha: float = doc("Prioritised replay: priority exponent (0 gives uniform sampling).", 0.6)
    beta0: float = doc("Prioritised replay: initial importance-weight exponent, annealed "
                       "linearly to 1 over train.total_env_steps.", 0.4)
    priority_eps: float = doc("Prioritised replay: added to |TD error| so no transition gets "
                              "priority 0.", 1e-6)
    her_strategy: Literal["none", "future", "final", "episode"] = doc(
        "Hindsight experience replay (Andrychowicz et al. 2017) for goal-conditioned envs "
        "(Dict observations 'observation', 'achieved_goal', 'desired_goal' and the env's "
        "compute_reward, as Gymnasium-Robotics defines them): at sampling time a share "
        "her_k / (her_k + 1) of each batch gets its desired goal replaced by a goal the "
        "episode achieved, and its reward recomputed. 'future': achieved at a later step "
        "(or the step itself) of the same episode; 'final': at the episode's last step; "
        "'episode': at any step of it; 'none': plain replay. SAC, TD3, DDPG and MPO; "
        "n_step=1, uniform replay.", "none")
    her_k: int = doc("HER: relabelled goals per real transition (SB3's n_sampled_goal): "
                     "her_k / (her_k + 1) of each batch is relabelled.", 4)
    exploration_initial_eps: float = doc("DQN: initial probability of a random action.", 1.0)
    exploration_final_eps: float = doc("DQN: final probability of a random action.", 0.05)
    exploration_fraction: float = doc("DQN: fraction of train.total_env_steps over which the "
                                      "random-action probability decays linearly.", 0.1)
    ratio_tolerance: int = doc(
        "Collector ranks: gradient steps the learner may fall behind the replay ratio "
        "(gradient_steps per train_freq steps of env.num_envs envs, as in one process) "
        "before it stops taking chunks, which holds the collectors back until it caught up "
        "(a rate limiter, as in Reverb); -1 never holds them back, so a slow learner "
        "trains at whatever ratio it reaches (Ape-X's free-running actors).", 256)
    per_collector_eps: bool = doc(
        "DQN on collector ranks (Ape-X): collector i of N acts with the fixed epsilon "
        "collector_eps_base ** (1 + collector_eps_alpha * i / (N - 1)) instead of the "
        "decaying schedule, so the collectors explore from a lot to hardly at all.", False)
    collector_eps_base: float = doc("Ape-X epsilon schedule: the base epsilon.", 0.4)
    collector_eps_alpha: float = doc("Ape-X epsilon schedule: the exponent's spread.", 7.0)
    initial_priorities: Literal["max", "collector"] = doc(
        "Prioritised replay: the priority of a new transition. 'max': the largest seen so "
        "far (replayed soon, Schaul et al.); 'collector': its |n-step TD error| computed by "
        "the collector with its copy of the Q-network (Ape-X; DQN only).", "max")
    double_q: bool = doc("DQN: pick the next action with the online network and value it "
                         "with the target network (double Q-learning).", True)
    action_noise: Literal["none", "gaussian", "ornstein_uhlenbeck"] = doc(
        "TD3/DDPG: exploration noise added to the deterministic action ('ornstein_uhlenbeck' "
        "is temporally correlated, reset at episode ends).", "gaussian")
    noise_std: float = doc("TD3/DDPG: std of the exploration noise, in units of half the "
                           "action range (actions live in [-1, 1] before scaling).", 0.1)
    mpo_epsilon: float = doc("MPO: KL bound of the E-step's improved policy from the target "
                             "policy (sets the temperature's dual).", 0.1)
    mpo_epsilon_mean: float = doc("MPO: KL bound of the policy mean's move per step, per "
                                  "action dimension (decoupled trust region).", 0.01)
    mpo_epsilon_std: float = doc("MPO: KL bound of the policy std's move per step, per action "
                                 "dimension.", 1e-5)
    mpo_action_samples: int = doc("MPO: actions sampled from the target policy per state, for "
                                  "the E-step and the critics' targets.", 20)
    mpo_dual_lr: float = doc("MPO: learning rate of the dual variables (temperature and the "
                             "two Lagrange multipliers).", 1e-2)
    mpo_init_temperature: float = doc("MPO: initial temperature.", 1.0)
    mpo_init_alpha: float = doc("MPO: initial Lagrange multipliers of the trust regions.", 1.0)
    ou_theta: float = doc("Ornstein-Uhlenbeck noise: rate of mean reversion.", 0.15)
    ou_dt: float = doc("Ornstein-Uhlenbeck noise: time step.", 1e-2)
    policy_delay: int = doc("TD3: critic gradient steps per policy (and target) update.", 2)
    target_policy_noise: float = doc("TD3: std of the noise on the target policy's action "
                                     "(target policy smoothing; DDPG uses none).", 0.2)
    target_noise_clip: float = doc("TD3: clip of the target policy noise.", 0.5)
    n_critics: int = doc("SAC/TD3: critics whose minimum makes the target (TD3 and SAC use 2; "
                         "DDPG always 1).", 2)
    learn_ent_coef: bool = doc("SAC: learn the entropy temperature so the policy's entropy "
                               "tracks target_entropy (automatic temperature).", True)
    ent_coef_init: float = doc("SAC: initial (or, without learn_ent_coef, fixed) entropy "
                               "temperature.", 1.0)
    target_entropy: float | None = doc("SAC: entropy the temperature aims at; None uses "
                                          "-(action dimensions).", None)

