"""Assemble an agent's components from a config: the one place that knows every class."""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

from hpcrl.config.loader import from_dict
from hpcrl.config.policy_addons import PolicyAddonsConfig
from hpcrl.config.rnd import RndConfig
from hpcrl.config.schema import ActorConfig, Config
from hpcrl.config.validate import sequence_length
from hpcrl.core.actor import ActorCritic
from hpcrl.core.algorithms import algorithm_capabilities
from hpcrl.core.env_groups import resolve_groups
from hpcrl.core.envs import EnvSpaces, UnsupportedEnv, as_box, probe_spaces
from hpcrl.core.memory import memory_state_size
from hpcrl.core.obs_format import box_format, format_from_record
from hpcrl.core.rollout import RolloutLayout
from hpcrl.core.storage import RolloutStorage
from hpcrl.core.vtrace_storage import VTraceStorage
from hpcrl.plugins import is_import_path


def make_actor(config: Config, spaces: EnvSpaces) -> ActorCritic:
    """A freshly initialised actor-critic of the on-policy ``config.algo.name`` (its class's
    :meth:`~hpcrl.core.algorithms.base.OnPolicyAlgorithm.policy_for`); the same seed gives
    the same weights everywhere."""
    from hpcrl.core.algorithms import algorithm_class

    return algorithm_class(config.algo.name).policy_for(spaces, config)


def rollout_layout(config: Config, spaces: EnvSpaces, num_envs: int) -> RolloutLayout:
    """The rollout of ``num_envs`` envs (with the recurrent state at each sequence's start,
    for an actor with memory)."""
    state = memory_state_size(config.actor)
    return RolloutLayout(config.algo.num_steps, num_envs, spaces.obs_shape, spaces.action_shape,
                         spaces.obs_format.dtype, state,
                         sequence_length(config) if state else 0, config.rnd.enabled,
                         "int64" if spaces.integer_actions else "float32")




def make_storage(config: Config, spaces: EnvSpaces, device: torch.device | str = "cpu"
                 ) -> RolloutStorage | VTraceStorage:
    """The gradient worker's rollout storage: GAE targets, or V-trace sequences (impala)."""
    from hpcrl.core.algorithms import algorithm_class

    rewards = "reward" in config.algo.addons.predictors  # a reward predictor's targets
    if algorithm_class(config.algo.name).storage == "vtrace":
        return VTraceStorage(config.algo.gamma, device, discrete_actions=spaces.integer_actions,
                             keep_rewards=rewards)
    return RolloutStorage(config.algo.gamma, config.algo.gae_lambda, device,
                          discrete_actions=spaces.integer_actions, keep_rewards=rewards)


def demonstrations(config: Config) -> Any | None:
    """The demonstration keys of ``config``'s algorithm (``demos``, ``demos_fraction``,
    ``demos_own``: PPO+D's) when its own section names a file, else None, as its class
    reads them (:meth:`~hpcrl.core.algorithms.contract.Algorithm.demonstrations`)."""
    from hpcrl.core.algorithms import algorithm_type

    return algorithm_type(config.algo.name).demonstrations(config.algo.own)


def env_groups(config: Config, remote: bool) -> int:
    """How many groups a collecting process of ``config`` cuts its envs into
    (``scheme.env_groups``, 0 resolved): ``remote`` when an inference rank acts for it."""
    from hpcrl.core.envpool_envs import uses_envpool

    if demonstrations(config) is not None:  # PPO+D's slots replay in one batch of envs
        return 1
    elsewhere = config.env.vectorization == "async" or uses_envpool(config.env)
    return resolve_groups(config.scheme.env_groups, config.env.num_envs, remote or elsewhere)


def env_spaces(config: Config) -> EnvSpaces:
    """The env's spaces, refused in one line where the chosen algorithm cannot take them."""
    spaces = probe_spaces(config.env)
    if config.actor.network:  # the user's network, built once to check its contract
        from hpcrl.contracts import make_network

        make_network(config.actor.network, config.actor.network_kwargs,
                     spaces.observation_space)
    if config.replay.her_strategy != "none" and config.algo.capabilities.goal_relabelling:
        from hpcrl.core.replay.goals import goal_env_problem

        problem = goal_env_problem(config.env, spaces.observation_space)
        if problem:
            raise UnsupportedEnv(problem)
    if config.algo.capabilities.predicts_observations:  # a world model of the env
        from hpcrl.core.model_based.checks import model_env_problem

        problem = model_env_problem(config, spaces)
        if problem:
            raise UnsupportedEnv(problem)
    demos = demonstrations(config)
    if demos is not None:  # the file fits the env
        from hpcrl.core.demo_replay import demos_problem

        # probe_spaces builds the spaces of a real env, observation space included
        assert spaces.observation_space is not None
        problem = demos_problem(demos.demos, spaces.observation_space,
                                spaces.action_space)
        if problem:
            raise UnsupportedEnv(problem)
    if config.algo.addons.kl_policies:  # the other policies exist and fit the env
        from hpcrl.reference_policies import reference_problem

        problem = reference_problem(config, spaces)
        if problem:
            raise UnsupportedEnv(problem)
    return spaces


# -- the policy part of a checkpoint: enough to rebuild the actor without the env ----------
def policy_record(config: Config, spaces: EnvSpaces, actor: torch.nn.Module,
                  config_dict: dict[str, Any] | None = None) -> dict[str, Any]:
    """The actor's weights with what rebuilds it (config, observation and action spaces).

    ``config_dict``: ``config`` as plain dicts, when the caller keeps one. A run writes a
    record per checkpoint; building the config's dicts anew each time left the allocator
    holding about 0.75 kB more per checkpoint for the first few thousand (bounded, but a
    soak of a default run read it as growth), and the config does not change during a run.
    """
    record = {"obs_shape": list(spaces.obs_shape), "obs_format": spaces.obs_format.record(),
              "action": action_record(spaces.action_space),
              "config": config_dict if config_dict is not None else _config_dict(config),
              "state_dict": actor.state_dict(),
              # what the state dict fits: an actor-critic, or an off-policy algorithm's own
              # policy (a plug-in's is known only by importing it: this says which)
              "acts_with": "actor_critic" if isinstance(actor, ActorCritic) else "policy"}
    box = spaces.observation_space
    if config.actor.network and isinstance(box, gym.spaces.Box):  # the user's network takes it
        record["observation_space"] = {"low": torch.from_numpy(np.asarray(box.low).copy()),
                                       "high": torch.from_numpy(np.asarray(box.high).copy()),
                                       "dtype": str(box.dtype)}
    return record


def action_record(space: gym.Space) -> dict[str, Any]:
    """The action space as a policy record keeps it (plain data and tensors)."""
    if isinstance(space, gym.spaces.Discrete):
        return {"type": "discrete", "n": int(space.n)}
    if isinstance(space, gym.spaces.MultiDiscrete):
        return {"type": "multi_discrete", "nvec": torch.from_numpy(
            np.asarray(space.nvec, np.int64).copy())}
    if isinstance(space, gym.spaces.MultiBinary):
        # n: an int, or the shape of a multi-dimensional space (a tuple: int() refused it)
        return {"type": "multi_binary", "n": space.n if isinstance(space.n, int) else list(space.n)}
    box_space = as_box(space)
    return {"type": "box", "low": torch.from_numpy(box_space.low.copy()),
            "high": torch.from_numpy(box_space.high.copy())}


def _config_dict(config: Config) -> dict[str, Any]:
    from hpcrl.config.loader import to_dict
    return to_dict(config)


def actor_from_record(record: dict[str, Any]) -> torch.nn.Module:
    """Rebuild the trained actor stored by :func:`policy_record` (an :class:`ActorCritic`, or
    the policy module of an off-policy algorithm); calling it gives deterministic actions."""
    action = record["action"]
    if action["type"] == "discrete":
        space: gym.Space = gym.spaces.Discrete(action["n"])
    elif action["type"] == "multi_discrete":
        space = gym.spaces.MultiDiscrete(action["nvec"].numpy())
    elif action["type"] == "multi_binary":
        space = gym.spaces.MultiBinary(action["n"])
    else:
        # (float64 bounds, as DeepMind Control's, cast here: Box warns when it casts them)
        low, high = (action[key].numpy().astype(np.float32) for key in ("low", "high"))
        space = gym.spaces.Box(low, high, dtype=np.float32)
    # without a stored format: a plain Box, as EnvSpaces makes when given none
    fmt = (format_from_record(record["obs_format"]) if "obs_format" in record
           else box_format(tuple(record["obs_shape"])))
    box = record.get("observation_space")
    observation_space = (gym.spaces.Box(box["low"].numpy(), box["high"].numpy(),
                                        dtype=np.dtype(box["dtype"])) if box else None)
    spaces = EnvSpaces(tuple(record["obs_shape"]), space, fmt, observation_space)
    cfg = record["config"]
    name = cfg["algo"]["name"]
    # an on-policy plug-in acts through the actor-critic, so its module need not be
    # importable where the run is evaluated; an off-policy one's class builds its policy
    own_policy = (record.get("acts_with") == "policy" if is_import_path(name)
                  else algorithm_capabilities(name).replay)
    if own_policy:
        from hpcrl.core.algorithms import make_policy

        policy = make_policy(config_from_record(record), spaces)
        policy.load_state_dict(record["state_dict"])
        return policy.eval()
    addons = PolicyAddonsConfig(**cfg["algo"].get("addons", {}))
    actor = ActorCritic(spaces, ActorConfig(**cfg["actor"]), cfg["env"]["normalize_obs"],
                        cfg["env"]["clip_obs"], RndConfig(**cfg.get("rnd", {})),
                        addons.predictors)
    actor.load_state_dict(record["state_dict"])
    return actor.eval()


def config_from_record(record: dict[str, Any]) -> Config:
    """The :class:`Config` a :func:`policy_record` was trained with (its ``config`` entry)."""
    return from_dict(record["config"], saved=True)
