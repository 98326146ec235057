"""The reward a planner scores its candidates with: the env's own, vectorised, or learned.

A planner evaluates thousands of imagined transitions per env step, so a reward function it
calls takes whole batches of torch tensors: ``reward(obs, actions, next_obs) -> rewards``
with ``obs`` and ``next_obs`` ``[N, features]`` (the observation's features: a Box
observation flattened), ``actions`` ``[N, action dims]`` in the env's units, and ``[N]``
rewards out. ``algo.mpc.reward_fn`` says where it comes from (:func:`reward_function`):

- ``auto``: the env's own where it has one, else the world model's learned reward. An env
  supplies its reward by defining a method :data:`ENV_HOOK` (``planning_reward``) of that
  signature on its unwrapped class; Gymnasium's classic-control envs, which hpcrl cannot
  change, have theirs here (:data:`BUILT_IN`: Pendulum-v1, MountainCarContinuous-v0);
- ``learned``: the model's learned reward, for any env;
- ``module:function``: a user's function.

The reward must be the one the env gives the replay: an ``env.wrappers`` entry that changes
rewards changes what a known reward function should return (use ``learned`` then).
"""
from __future__ import annotations

from collections.abc import Callable

import torch

from hpcrl.components.import_paths import PluginError, is_import_path, load
from hpcrl.envs.make import make_env
from hpcrl.sections.schema import EnvConfig

RewardFunction = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
ENV_HOOK = "planning_reward"  # the method an env defines to give planners its reward
KEY = "algo.mpc.reward_fn"


def pendulum(obs: torch.Tensor, actions: torch.Tensor, next_obs: torch.Tensor
             ) -> torch.Tensor:
    """Pendulum-v1's reward: ``-(theta^2 + 0.1 theta_dot^2 + 0.001 u^2)`` of the state the
    action is taken in (``obs = [cos theta, sin theta, theta_dot]``), the torque clipped to
    its bound of 2."""
    theta = torch.atan2(obs[:, 1], obs[:, 0])
    torque = actions[:, 0].clamp(-2.0, 2.0)
    return -(theta * theta + 0.1 * obs[:, 2] * obs[:, 2] + 0.001 * torque * torque)


def mountain_car_continuous(obs: torch.Tensor, actions: torch.Tensor, next_obs: torch.Tensor
                            ) -> torch.Tensor:
    """MountainCarContinuous-v0's reward: 100 on reaching the goal (position >= 0.45 with a
    velocity >= 0 after the step), less ``0.1 a^2``."""
    goal = (next_obs[:, 0] >= 0.45) & (next_obs[:, 1] >= 0.0)
    return 100.0 * goal.to(actions.dtype) - 0.1 * actions[:, 0] * actions[:, 0]


#: The rewards of registered envs that cannot define :data:`ENV_HOOK` themselves.
BUILT_IN: dict[str, RewardFunction] = {"Pendulum-v1": pendulum,
                                       "MountainCarContinuous-v0": mountain_car_continuous}


def user_reward(spec: str) -> RewardFunction:
    """The function at import path ``spec`` (a :class:`PluginError` when it is none)."""
    fn = load(spec, KEY)
    if not callable(fn) or isinstance(fn, type):
        raise PluginError(f"config key '{KEY}' ({spec}): {fn!r} is not a function; name a "
                          f"function reward(obs, actions, next_obs) -> rewards")
    return fn  # type: ignore[no-any-return]


def reward_spec_problem(spec: str) -> str | None:
    """Why ``algo.mpc.reward_fn`` cannot be used, or None (checked with the config)."""
    if spec in ("auto", "learned"):
        return None
    if not is_import_path(spec):
        return (f"config key '{KEY}' must be 'auto', 'learned' or the import path "
                f"'module:function' of your own reward function, got {spec!r}")
    try:
        user_reward(spec)
    except PluginError as err:
        return str(err)
    return None


def env_reward(env: EnvConfig) -> RewardFunction | None:
    """The reward the env of ``env`` gives planners: its unwrapped env's
    :data:`ENV_HOOK` method (bound to an instance the function keeps), else the
    :data:`BUILT_IN` one of its id, else None."""
    instance = make_env(env)
    hook = getattr(instance.unwrapped, ENV_HOOK, None)
    if callable(hook):
        return hook  # type: ignore[no-any-return]  # bound: it keeps its env alive
    instance.close()
    return BUILT_IN.get(env.id.rpartition(":")[2])


def reward_function(spec: str, env: EnvConfig) -> RewardFunction | None:
    """The reward function ``algo.mpc.reward_fn`` (``spec``) names for the env of ``env``;
    None where the model learns the reward."""
    if spec == "learned":
        return None
    if is_import_path(spec):
        return user_reward(spec)
    return env_reward(env)


def reward_output_problem(reward: RewardFunction, features: int, action_dim: int,
                          origin: str) -> str | None:
    """Why ``reward`` (from ``origin``) cannot score batches, or None: it is called on a
    batch of 2 zero transitions and must return 2 finite rewards."""
    obs, actions = torch.zeros(2, features), torch.zeros(2, action_dim)
    try:
        out = reward(obs, actions, obs.clone())
    except Exception as err:  # the user's function may fail in any way
        return (f"config key '{KEY}': {origin} failed on a batch of 2 transitions ({err}); it "
                f"takes torch tensors obs [N, {features}], actions [N, {action_dim}] and "
                f"next_obs [N, {features}] and returns [N] rewards")
    if not isinstance(out, torch.Tensor) or out.reshape(-1).shape != (2,):
        shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        return (f"config key '{KEY}': {origin} returned {shape} for a batch of 2 "
                f"transitions; it must return one reward per row, a tensor [N]")
    return None
