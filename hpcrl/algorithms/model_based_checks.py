"""What an env must offer a model-based agent, checked where its spaces are first known
(:func:`hpcrl.build.env_spaces`), before any rank starts work: observations a model can
predict (vectors, not pixels) and, where the planner scores with a reward function, one that
takes batches."""
from __future__ import annotations

import gymnasium as gym
import numpy as np

from hpcrl.algorithms.own_section import own_section
from hpcrl.algorithms.registry import algorithms_with
from hpcrl.envs.vector import EnvSpaces
from hpcrl.models.model_based.rewards import reward_function, reward_output_problem
from hpcrl.sections.schema import AlgoConfig, EnvConfig


def has_images(spaces: EnvSpaces) -> bool:
    """Whether the observations are images, or a ``Dict`` with an image key."""
    fmt = spaces.obs_format
    return fmt.image or any(sub.image for _, sub, _ in fmt.keys)


def model_env_problem(algo: AlgoConfig, env: EnvConfig, spaces: EnvSpaces) -> str | None:
    """Why the world model of ``algo.name`` cannot learn the env ``env`` of ``spaces``, or
    None: image observations are refused (the model predicts the next observation itself),
    and a reward function other than the learned one must score a batch."""
    name, env_id = algo.name, env.id
    if has_images(spaces):
        pixels = ", ".join(algorithms_with(lambda caps: caps.image_observations))
        return (f"config key 'algo.name': {name} learns a model that predicts the next "
                f"observation, and env '{env_id}' observes images "
                f"({spaces.observation_space or spaces.obs_shape}); use an env with vector "
                f"observations, or one of {pixels} for pixels")
    spec = getattr(own_section(algo), "reward_fn", "learned")
    if not isinstance(spaces.action_space, gym.spaces.Box):
        return None  # the action space's own refusal names the algorithms that fit
    reward = reward_function(spec, env)
    if reward is None:
        return None
    origin = spec if spec != "auto" else f"env '{env_id}''s planning reward"
    return reward_output_problem(reward, spaces.obs_format.features,
                                 int(np.prod(spaces.action_space.shape)), origin)
