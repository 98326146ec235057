"""What the cost model reads of a config: its scheme's shape, a collecting rank's env steps,
a gradient worker's gradient steps and samples per update, the actor's size.

The model scales weakly: one gradient worker per GPU, each with the config's collector
ranks, envs and batch, and the config's gradient steps per update on each (a job of N
workers keeps each worker's minibatches only where its ``algo.ppo.minibatch_size`` grows
with N). Each function takes the sections it reads.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from hpcrl.algorithms import algorithm_capabilities, algorithm_class
from hpcrl.algorithms.own_section import own_section
from hpcrl.algorithms.registry import algorithm_settings
from hpcrl.build import env_spaces
from hpcrl.config.validate import minibatches_per_epoch
from hpcrl.scheme.cost_model import Shape, shape_of
from hpcrl.scheme.topology import collecting_ranks
from hpcrl.sections.schema import Config, EnvConfig, SchemeConfig


@dataclass(frozen=True)
class ConfigInputs:
    """What the model reads of a config: its scheme's shape, a collecting rank's env steps
    per rollout and vector-env steps (``algo.num_steps``), a gradient worker's gradient
    steps and samples (over all epochs) per update, and the collecting ranks of the
    config's own layout."""

    shape: Shape
    steps_per_collection: int
    vector_steps: int
    gradient_steps: int
    samples_per_update: int
    collecting_ranks: int


def gradient_steps_per_update(algo: Any, env: EnvConfig, scheme: SchemeConfig, replay: Any,
                              minibatches: int) -> tuple[int, int]:
    """A gradient worker's gradient steps per update and the samples they go over: PPO's
    epochs x ``minibatches`` an epoch; one step on the whole batch (A2C, IMPALA); a replay
    agent's training rounds in one chunk of ``algo.num_steps`` x its gradient steps."""
    samples = algo.num_steps * env.num_envs * max(scheme.collectors_per_worker, 1)
    caps = algorithm_capabilities(algo.name)
    if caps.replay:  # (a replay learner trains in rounds, not over a batch)
        rounds = max(algo.num_steps // max(replay.train_freq, 1), 1)
        per_round = replay.gradient_steps if replay.gradient_steps > 0 else replay.train_freq
        steps = rounds * per_round
        return steps, steps * replay.batch_size
    if caps.minibatched_epochs:
        epochs = int(getattr(own_section(algo), "num_epochs", 1))
        return epochs * minibatches, epochs * samples
    return 1, samples


def config_inputs(config: Config) -> ConfigInputs:
    """The model's inputs from ``config`` (see :class:`ConfigInputs`)."""
    algo, env, scheme = config.algo, config.env, config.scheme
    steps, samples = gradient_steps_per_update(algo, env, scheme, config.replay,
                                               minibatches_per_epoch(config))
    return ConfigInputs(shape_of(scheme), algo.num_steps * env.num_envs, algo.num_steps,
                        steps, samples, collecting_ranks(scheme))


def actor_sizes(config: Config) -> tuple[int, float]:
    """The actor's parameter count and the bytes of one collecting rank's rollout (its
    observations: ``algo.num_steps`` x ``env.num_envs`` of them)."""
    algo, env = config.algo, config.env
    spaces = env_spaces(config)
    actor = algorithm_class(algo.name).policy_for(spaces, algorithm_settings(config))
    params = sum(p.numel() for p in actor.parameters())
    itemsize = np.dtype(spaces.obs_format.dtype).itemsize
    obs = int(np.prod(spaces.obs_format.shape)) * itemsize
    return params, float(obs * algo.num_steps * env.num_envs)
