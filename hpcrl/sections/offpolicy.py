"""The config section the off-policy algorithms share: replay, training rhythm, targets.

It lives apart from :mod:`hpcrl.sections.schema` because only some algorithms read it;
``algo.*`` keys that every algorithm shares (``gamma``, ``lr``, ``lr_schedule``,
``max_grad_norm``, ``optimizer``, ``optimizer_eps``, ``num_steps``) keep their meaning, and
a key that one algorithm reads lives in its own section (``algo.dqn.double_q``,
``algo.td3.policy_delay``: :mod:`hpcrl.config.algo_sections`). Sensible values differ per
algorithm: the keys below default to the chosen algorithm's values
(:mod:`hpcrl.config.algo_defaults`); the field defaults are SAC's.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from hpcrl.field_docs import doc


@dataclass
class ReplayConfig:
    """Replay storage, training rhythm and targets of DQN, SAC, TD3, DDPG and MPO.

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
    ratio_tolerance: int = doc(
        "Collector ranks: gradient steps the learner may fall behind the replay ratio "
        "(gradient_steps per train_freq steps of env.num_envs envs, as in one process) "
        "before it stops taking chunks, which holds the collectors back until it caught up "
        "(a rate limiter, as in Reverb); -1 never holds them back, so a slow learner "
        "trains at whatever ratio it reaches (Ape-X's free-running actors).", 256)
