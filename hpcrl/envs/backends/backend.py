"""What hpcrl knows of one vector-env backend: a :class:`Backend` record, the registry of
them, and the choice ``env.backend`` makes among them.

``env.backend`` names a registered backend (``gymnasium``, ``envpool``, a plug-in's), or is
``auto`` (the default): the first backend other than Gymnasium whose record says ``auto``
should pick it for the config (EnvPool for Atari games under ``env.preset=atari``), else
Gymnasium. A backend asked for by name where it cannot step the config is refused with its
reason before any work starts (:func:`backend_problem`, read by the config's checks).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import gymnasium as gym

from hpcrl.envs.registry import Registry, UnknownName
from hpcrl.errors import ExplainedError
from hpcrl.sections.schema import EnvConfig

AUTO = "auto"  # env.backend's default: the backend that suits the config
DEFAULT_BACKEND = "gymnasium"  # what auto falls back to, and steps every env


class BackendUnavailable(ExplainedError, ValueError):
    """``env.backend`` names a backend that cannot step the config's envs."""


@dataclass(frozen=True)
class Backend:
    """One vector-env backend of :data:`BACKENDS`.

    ``make(config, num_envs, global_indices)`` makes ``num_envs`` envs of ``config`` as one
    Gymnasium vector env with same-step autoreset (``global_indices``: the job's index of
    each env of a collector, None for evaluation's envs). ``problem(config)`` says why the
    backend cannot step the config (with the fix), or None. ``auto(config)`` says whether
    ``env.backend=auto`` picks this backend for the config.
    """

    name: str
    make: Callable[[EnvConfig, int, Sequence[int] | None], gym.vector.VectorEnv]
    problem: Callable[[EnvConfig], str | None]
    auto: Callable[[EnvConfig], bool]


#: Every backend, registered by its own module of :mod:`hpcrl.envs.backends`.
BACKENDS: Registry[Backend] = Registry("env backend", "hpcrl.envs.backends",
                                       key="env.backend")


def backend_problem(config: EnvConfig) -> str | None:
    """Why ``env.backend`` cannot step the envs of ``config`` (an unknown name, or a
    backend that cannot serve the config), or None."""
    if config.backend == AUTO:
        return None
    try:
        backend = BACKENDS.get(config.backend)
    except UnknownName as err:
        return str(err)
    found = backend.problem(config)
    return None if found is None else f"config key 'env.backend' ({backend.name}): {found}"


def vector_backend(config: EnvConfig) -> Backend:
    """The backend that steps a collector's envs of ``config``; raises
    :class:`BackendUnavailable` where ``env.backend`` names one that cannot."""
    if config.backend == AUTO:
        return next((backend for backend in BACKENDS
                     if backend.name != DEFAULT_BACKEND and backend.auto(config)),
                    BACKENDS.get(DEFAULT_BACKEND))
    problem = backend_problem(config)
    if problem is not None:
        raise BackendUnavailable(problem)
    return BACKENDS.get(config.backend)
