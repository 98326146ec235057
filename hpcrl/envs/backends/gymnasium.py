"""Gymnasium as a collector's vector env: checkpointable Python envs stepped in the
collector's process (``env.vectorization=sync``) or one subprocess each (``async``).

It steps every env hpcrl can make, and is what ``env.backend=auto`` falls back to. A
collector's envs come back when they fail (:mod:`hpcrl.envs.restarts`:
``env.max_restarts``; in subprocesses also when one hangs past ``env.step_timeout_s`` or
dies); other envs (evaluation's) do not.
"""
from __future__ import annotations

from collections.abc import Sequence

import gymnasium as gym

from hpcrl.envs.backends.backend import BACKENDS, DEFAULT_BACKEND, Backend
from hpcrl.envs.child_signals import stop_signals_held
from hpcrl.envs.restarting_async import RestartingAsyncVectorEnv
from hpcrl.envs.restarts import restartable
from hpcrl.envs.vector import env_factory
from hpcrl.sections.schema import EnvConfig


def gymnasium_vector_env(config: EnvConfig, num_envs: int,
                         global_indices: Sequence[int] | None = None) -> gym.vector.VectorEnv:
    """``num_envs`` checkpointable envs of ``config`` in one Gymnasium vector env, with
    same-step autoreset; a collector's (``global_indices`` given) come back when they
    fail."""
    collecting = global_indices is not None
    restarts = config.max_restarts if collecting else 0
    labels = [f"env {i} (global index)" for i in (global_indices or range(num_envs))]
    fns = [restartable(env_factory(config), restarts, label) for label in labels]
    mode = gym.vector.AutoresetMode.SAME_STEP
    with stop_signals_held():  # env processes leave the stop signals to their rank
        if config.vectorization == "async":
            if collecting:
                return RestartingAsyncVectorEnv(fns, config.step_timeout_s,
                                                labels.__getitem__)
            return gym.vector.AsyncVectorEnv(fns, autoreset_mode=mode)
        return gym.vector.SyncVectorEnv(fns, autoreset_mode=mode)


def _steps_any(config: EnvConfig) -> str | None:
    return None  # Gymnasium steps every env hpcrl makes


def _never_auto(config: EnvConfig) -> bool:
    return False  # auto's fallback, not its pick


GYMNASIUM = BACKENDS.add(Backend(name=DEFAULT_BACKEND, make=gymnasium_vector_env,
                                 problem=_steps_any, auto=_never_auto))
