"""Assemble an agent's components from a config: the one place that knows every class."""
from __future__ import annotations

from typing import Any

import torch

from hpcrl.algorithms import algorithm_capabilities, algorithm_class, algorithm_type
from hpcrl.algorithms.model_based_checks import model_env_problem
from hpcrl.algorithms.own_section import own_section
from hpcrl.algorithms.registry import algorithm_settings
from hpcrl.buffers.replay.goals import goal_env_problem
from hpcrl.buffers.rollout import RolloutLayout
from hpcrl.buffers.rollout_storage import RolloutStorage
from hpcrl.buffers.vtrace_storage import VTraceStorage
from hpcrl.components.contracts import make_network
from hpcrl.config.validate import sequence_length
from hpcrl.envs.backends.envpool import uses_envpool
from hpcrl.envs.groups import resolve_groups
from hpcrl.envs.multiagent.play_modes import slots_per_game
from hpcrl.envs.vector import EnvSpaces, UnsupportedEnv, probe_spaces
from hpcrl.models.actor import ActorCritic
from hpcrl.models.memory import memory_state_size
from hpcrl.scheme.topology import collecting_ranks
from hpcrl.sections.schema import Config
from hpcrl.trained.reference_policies import reference_problem


def make_actor(config: Config, spaces: EnvSpaces) -> ActorCritic:
    """A freshly initialised actor-critic of the on-policy ``config.algo.name`` (its class's
    :meth:`~hpcrl.algorithms.on_policy.OnPolicyAlgorithm.policy_for`); the same seed gives
    the same weights everywhere."""
    return algorithm_class(config.algo.name).policy_for(spaces, algorithm_settings(config))


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
    rewards = "reward" in config.algo.addons.predictors  # a reward predictor's targets
    if algorithm_class(config.algo.name).storage == "vtrace":
        return VTraceStorage(config.algo.gamma, device, discrete_actions=spaces.integer_actions,
                             keep_rewards=rewards)
    return RolloutStorage(config.algo.gamma, config.algo.gae_lambda, device,
                          discrete_actions=spaces.integer_actions, keep_rewards=rewards)


def slot_play(config: Config) -> Any | None:
    """What some slots of ``config``'s job play instead of stepping an env, as its
    algorithm's class declares it (:meth:`~hpcrl.algorithms.algorithm.Algorithm.slot_play`:
    PPO+D's demonstrations), or None."""
    total = config.env.num_envs * max(collecting_ranks(config.scheme), 1)
    return algorithm_type(config.algo.name).slot_play(own_section(config.algo), total)


def env_groups(config: Config, remote: bool) -> int:
    """How many groups a collecting process of ``config`` cuts its envs into
    (``scheme.env_groups``, 0 resolved): ``remote`` when an inference rank acts for it."""
    if slot_play(config) is not None:  # slots that play (PPO+D's) are in one batch of envs
        return 1
    elsewhere = config.env.vectorization == "async" or uses_envpool(config.env)
    groups = resolve_groups(config.scheme.env_groups, config.env.num_envs, remote or elsewhere)
    if config.scheme.env_groups == 0 and (config.env.num_envs // groups) % slots_per_game(
            config.env):
        return 1  # auto keeps a game's agents in one group
    return groups


def env_spaces(config: Config) -> EnvSpaces:
    """The env's spaces, refused in one line where the chosen algorithm cannot take them."""
    spaces = probe_spaces(config.env)
    caps = algorithm_capabilities(config.algo.name)
    if config.actor.network:  # the user's network, built once to check its contract

        make_network(config.actor.network, config.actor.network_kwargs,
                     spaces.observation_space)
    if config.replay.her_strategy != "none" and caps.goal_relabelling:
        problem = goal_env_problem(config.env, spaces.observation_space)
        if problem:
            raise UnsupportedEnv(problem)
    if caps.predicts_observations:  # a world model of the env

        problem = model_env_problem(config.algo, config.env, spaces)
        if problem:
            raise UnsupportedEnv(problem)
    play = slot_play(config)
    if play is not None:  # what the slots play fits the env (PPO+D's demonstration file)

        # probe_spaces builds the spaces of a real env, observation space included
        assert spaces.observation_space is not None
        problem = play.problem(spaces.observation_space, spaces.action_space)
        if problem:
            raise UnsupportedEnv(problem)
    if config.algo.addons.kl_policies:  # the other policies exist and fit the env

        problem = reference_problem(config.algo.addons, spaces)
        if problem:
            raise UnsupportedEnv(problem)
    return spaces
