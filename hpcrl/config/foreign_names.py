"""The names other RL libraries give hpcrl's config keys, for the hint of an unknown key.

A user coming from Stable-Baselines3 (and RL Zoo's hyperparameter files) or CleanRL writes
the names they know: ``learning_rate``, ``n_steps``, ``n_epochs``, ``batch_size``. Edit
distance maps those to unrelated keys (``learning_rate`` is closer to ``clip_range`` than to
``lr``), so an unknown key's last part is looked up here first, by name.
"""
from __future__ import annotations

SB3 = "Stable-Baselines3"
ZOO = "RL Zoo"
CLEANRL = "CleanRL"

# another library's name -> (the hpcrl key or keys it means, quoted; whose name it is). Names
# that hpcrl uses too (gamma, ent_coef, tau, buffer_size...) need no entry: the same name in
# another section is the second hint tried.
FOREIGN_NAMES: dict[str, tuple[str, str]] = {
    "learning_rate": ("'algo.lr'", SB3),
    "n_steps": ("'algo.num_steps'", SB3),
    "n_epochs": ("'algo.ppo.num_epochs'", SB3),
    "batch_size": ("'algo.ppo.minibatch_size' (ppo) or 'replay.batch_size' (dqn, sac, td3, "
                   "ddpg)", SB3),
    "n_envs": ("'env.num_envs'", SB3),
    "total_timesteps": ("'train.total_env_steps'", SB3),
    "n_timesteps": ("'train.total_env_steps'", ZOO),
    "net_arch": ("'actor.hidden_sizes'", SB3),
    "activation_fn": ("'actor.activation'", SB3),
    "policy_kwargs": ("'actor.hidden_sizes', 'actor.activation', 'actor.ortho_init' or "
                      "'actor.log_std_init'", SB3),
    "normalize": ("'env.normalize_obs' and 'env.normalize_reward'", ZOO),
    "env_kwargs": ("'env.kwargs'", ZOO),
    "env_wrapper": ("'env.wrappers'", ZOO),
    "eval_freq": ("'train.eval_every'", SB3),
    "n_eval_episodes": ("'train.eval_episodes'", SB3),
    "update_epochs": ("'algo.ppo.num_epochs'", CLEANRL),
    "num_minibatches": ("'algo.ppo.minibatch_size' (the size of a minibatch, not their number)",
                        CLEANRL),
    "clip_coef": ("'algo.ppo.clip_range'", CLEANRL),
    "clip_vloss": ("'algo.ppo.clip_range_vf'", CLEANRL),
    "norm_adv": ("'algo.normalize_advantage'", CLEANRL),
    "anneal_lr": ("'algo.lr_schedule' (linear)", CLEANRL),
}


def foreign_hint(key: str) -> str | None:
    """``did you mean 'algo.lr'? ('learning_rate' is Stable-Baselines3's name)`` for an
    unknown ``key`` whose last part is another library's name for an hpcrl key, else
    None."""
    leaf = key.rsplit(".", 1)[-1]
    found = FOREIGN_NAMES.get(leaf)
    if found is None:
        return None
    target, library = found
    return f"did you mean {target}? ('{leaf}' is {library}'s name)"
