"""Gymnasium vector envs for collectors: seeded by global env index, checkpointable.

Env ``i`` of the whole job (its *global index*) is seeded with ``seed + i`` wherever it runs,
so the same envs see the same episodes whether one process holds all of them or many
processes hold a slice each. Vector envs use same-step autoreset: a step that ends an
episode returns the first observation of the next one and the final observation in
``info["final_obs"]``, which the collector needs to bootstrap truncated episodes.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import gymnasium as gym
import numpy as np

from hpcrl.envs.backends.backend import backend_problem, vector_backend
from hpcrl.envs.make import make_env, preset_problem, shared_agents_env
from hpcrl.envs.multiagent.agent_slots import AgentSlotsVectorEnv, slot_games
from hpcrl.envs.multiagent.named_envs import multiagent_env_problem
from hpcrl.envs.multiagent.play_modes import SHARED, agents_mode, is_multiagent
from hpcrl.envs.obs_format import ObsFormat, UnsupportedSpace, box_format, obs_format
from hpcrl.envs.state import capture_env_state, restore_env_state
from hpcrl.envs.suites.suite_ids import install_of_module, register_suite
from hpcrl.errors import ConfigError
from hpcrl.sections.schema import EnvConfig

#: The method through which a collector tells its envs the job's env steps at the start of
#: each collection (``envs.call(JOB_CLOCK, steps)``, past every wrapper), for envs whose
#: choices follow the job's progress: a league's snapshots join a self-play env's opponents
#: by it, at points of its step sequence that no timing moves.
JOB_CLOCK = "hpcrl_job_clock"


class UnsupportedEnv(ConfigError):
    """An env hpcrl cannot train on as it is; the message names the env and the fix."""


# Gymnasium's own env families whose packages are optional, and the install that brings
# them (the suites' are in their records: install_of_module).
_FAMILY_INSTALLS = {
    "gymnasium.envs.box2d": 'pip install "hpcrl[box2d]"  (or "gymnasium[box2d]")',
    "gymnasium.envs.mujoco": 'pip install "hpcrl[mujoco]"  (or "gymnasium[mujoco]")',
}


def _missing_package_problem(env_id: str, entry_point: str, err: Exception) -> str:
    missing = getattr(err, "name", None) or str(err).split("\n")[0]
    fix = next((cmd for prefix, cmd in _FAMILY_INSTALLS.items()
                if entry_point.startswith(prefix)), None) or install_of_module(entry_point)
    if fix is None:
        fix = f"install the package that provides '{missing}'"
    return (f"config key 'env.id': env '{env_id}' needs the module '{missing}', which is not "
            f"installed; fix: {fix}")


def env_id_problem(env_id: str) -> str | None:
    """Why ``env_id`` cannot be made, or None: checks the module import, the registry
    (after registering the id's suite: :mod:`hpcrl.envs.suites`) and that the packages
    of the env's family (Box2D, MuJoCo, Atari...) are installed."""
    suite = register_suite(env_id)
    if suite is not None:
        return suite
    module, _, name = env_id.rpartition(":")
    if module:
        try:
            importlib.import_module(module)
        except ImportError as err:
            return (f"config key 'env.id': cannot import module '{module}' of '{env_id}' ({err}); "
                    f"install it or fix the module name")
    try:
        spec = gym.spec(name)
    except gym.error.Error as err:
        return (f"config key 'env.id': unknown environment '{env_id}': {err} "
                f"(registered ids: `python -c 'import gymnasium; gymnasium.pprint_registry()'`)")
    entry = spec.entry_point
    if isinstance(entry, str) and ":" in entry:
        try:
            importlib.import_module(entry.split(":", 1)[0])
        except (ImportError, gym.error.DependencyNotInstalled) as err:
            return _missing_package_problem(env_id, entry, err)
    return None


class CheckpointableEnv(gym.Wrapper):
    """Outermost wrapper that reads and writes the env's state as plain data.

    Vector envs reach it through ``call("hpcrl_state")`` and ``set_attr("hpcrl_state", ...)``,
    which works the same for envs in this process and in subprocesses.
    """

    @property
    def hpcrl_state(self) -> dict[str, Any]:
        """The wrapped env's captured layers and the names of the layers that could not be
        captured (``{'layers': ..., 'missing': [...]}``)."""
        layers, missing = capture_env_state(self.env)
        return {"layers": layers, "missing": missing}

    @hpcrl_state.setter
    def hpcrl_state(self, state: dict[str, Any]) -> None:
        """Restore the layers of a state :attr:`hpcrl_state` gave."""
        restore_env_state(self.env, state["layers"])


def env_problem(config: EnvConfig) -> str | None:
    """Why the env of ``config`` cannot be made, or None: :func:`env_id_problem`, then
    whether ``env.preset`` fits the id, then whether ``env.backend`` can step it."""
    if is_multiagent(config):
        return multiagent_env_problem(config.id) or backend_problem(config)
    problem = env_id_problem(config.id) or preset_problem(config) or backend_problem(config)
    if problem is None and config.envpool_threads < 0:
        problem = "config key 'env.envpool_threads' must be >= 0 (0: one per env)"
    return problem


def env_factory(config: EnvConfig) -> Callable[[], gym.Env]:
    """A function that makes one checkpointable env of ``config`` (a vector env's)."""
    def make() -> gym.Env:
        return CheckpointableEnv(make_env(config))
    return make


@dataclass(frozen=True)
class EnvSpaces:
    """What the actor needs to know about an env: how observations are carried (their
    :class:`~hpcrl.envs.obs_format.ObsFormat`, a plain Box of ``obs_shape`` when not given)
    and the action space."""

    obs_shape: tuple[int, ...]
    action_space: gym.Space
    obs_format: ObsFormat = None  # type: ignore[assignment]  # filled in below
    observation_space: gym.Space | None = None  # the env's (a user's network takes it)

    def __post_init__(self) -> None:
        if self.obs_format is None:
            object.__setattr__(self, "obs_format", box_format(self.obs_shape))

    @property
    def discrete(self) -> bool:
        """One Discrete action (what a Q-network needs)."""
        return isinstance(self.action_space, gym.spaces.Discrete)

    @property
    def categories(self) -> tuple[int, ...] | None:
        """Choices of each integer action component (Discrete: one; MultiDiscrete: its
        ``nvec``; MultiBinary: 2 each), or None for Box actions."""
        return action_categories(self.action_space)

    @property
    def integer_actions(self) -> bool:
        """Whether actions are integers (Discrete, MultiDiscrete or MultiBinary), not a Box."""
        return self.categories is not None

    @property
    def action_shape(self) -> tuple[int, ...]:
        """The shape of one env's action: ``()`` for Discrete, the space's shape otherwise."""
        return () if self.discrete else tuple(self.action_space.shape or ())


def as_box(space: gym.Space) -> gym.spaces.Box:
    """``space`` as a Box (its ``low``/``high``, its shape), where the code takes a Box
    (continuous actions, a screen); a TypeError for any other space, which the config
    checks refuse before."""
    if not isinstance(space, gym.spaces.Box):
        raise TypeError(f"a Box space is needed here, got {space}")
    return space


def as_discrete(space: gym.Space) -> gym.spaces.Discrete:
    """``space`` as the one Discrete action a Q-network takes; a TypeError for any other
    space, which the config checks refuse before."""
    if not isinstance(space, gym.spaces.Discrete):
        raise TypeError(f"a Q-network needs a Discrete action space, got {space}")
    return space


def action_categories(space: gym.Space) -> tuple[int, ...] | None:
    """See :attr:`EnvSpaces.categories`."""
    if isinstance(space, gym.spaces.Discrete):
        return (int(space.n),)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return tuple(int(n) for n in np.asarray(space.nvec).reshape(-1))
    if isinstance(space, gym.spaces.MultiBinary):
        return (2,) * int(np.prod(space.shape))
    return None


def spaces_of(observation_space: gym.Space, action_space: gym.Space, env_id: str,
              keep_integers: bool = True) -> EnvSpaces:
    """Check that the actor supports these spaces, with an error that names the env.
    ``keep_integers=False`` carries integer Box observations as float32 (normalised runs)."""
    try:
        fmt = obs_format(observation_space, keep_integers)
    except UnsupportedSpace as err:
        raise UnsupportedEnv(f"env '{env_id}': {err}") from None
    kinds = (gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary,
             gym.spaces.Box)
    if not isinstance(action_space, kinds):
        raise UnsupportedEnv(f"env '{env_id}' has action space {action_space}; hpcrl's actor "
                             f"takes Discrete, MultiDiscrete, MultiBinary or Box actions")
    if isinstance(action_space, (gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)) and len(
            action_space.shape) != 1:
        raise UnsupportedEnv(f"env '{env_id}' has action space {action_space}, of shape "
                             f"{action_space.shape}; hpcrl takes one-dimensional MultiDiscrete "
                             f"and MultiBinary actions (flatten them with a wrapper)")
    return EnvSpaces(fmt.shape, action_space, fmt, observation_space)


def probe_spaces(config: EnvConfig) -> EnvSpaces:
    """The spaces of ``config.id``, from one env that is closed again at once."""
    env = make_env(config)
    joint = env.unwrapped  # a game of agents sharing a policy: one agent's spaces
    observed = getattr(joint, "agent_observation_space", env.observation_space)
    acted = getattr(joint, "agent_action_space", env.action_space)
    try:
        spaces = spaces_of(observed, acted, config.id, keep_integers=not config.normalize_obs)
    finally:
        env.close()
    if config.normalize_obs and spaces.obs_format.packed:
        raise UnsupportedEnv(f"config key 'env.normalize_obs': env '{config.id}' observes a "
                             f"Dict, whose keys hpcrl does not normalise; set "
                             f"env.normalize_obs=false, or normalise inside the env with "
                             f"gymnasium.wrappers.NormalizeObservation on a flattened Dict")
    if config.normalize_obs and spaces.obs_format.one_hot:
        raise UnsupportedEnv(f"config key 'env.normalize_obs': env '{config.id}' observes "
                             f"{env.observation_space}, whose integer parts are one-hot encoded "
                             f"and not normalised; set env.normalize_obs=false")
    return spaces


def make_vector_env(config: EnvConfig, num_envs: int,
                    global_indices: Sequence[int] | None = None) -> gym.vector.VectorEnv:
    """``num_envs`` envs of ``config`` as one vector env with same-step autoreset, made by
    the backend ``env.backend`` picks (:mod:`hpcrl.envs.backends`: checkpointable
    Gymnasium envs in-process or in subprocesses, or one EnvPool).

    A collector's envs (``global_indices``: the job's index of each) come back when they
    fail (:mod:`hpcrl.envs.restarts`: ``env.max_restarts``); other envs (evaluation's)
    do not."""
    if is_multiagent(config) and agents_mode(config) == SHARED:
        return shared_agents_vector_env(config, num_envs, global_indices)
    return vector_backend(config).make(config, num_envs, global_indices)


def shared_agents_vector_env(config: EnvConfig, num_envs: int,
                             global_indices: Sequence[int] | None = None
                             ) -> gym.vector.VectorEnv:
    """``num_envs`` slots of a game played by one shared policy (``env.agents=shared``):
    ``num_envs / agents`` games made by the backend, each agent of each one a slot
    (:class:`~hpcrl.envs.multiagent.agent_slots.AgentSlotsVectorEnv`)."""
    probe = shared_agents_env(config)
    agents = probe.agent_rows
    spaces = probe.agent_observation_space, probe.agent_action_space
    probe.close()
    games = slot_games(global_indices if global_indices is not None else range(num_envs),
                       agents)
    inner = vector_backend(config).make(config, len(games),
                                        games if global_indices is not None else None)
    return AgentSlotsVectorEnv(inner, agents, *spaces)


def env_seeds(seed: int, first_index: int, count: int) -> list[int]:
    """Seeds of the envs with global indices ``first_index .. first_index + count - 1``."""
    return [seed + first_index + i for i in range(count)]


# gymnasium's VectorEnv base class types reset(seed=) as one int and declares neither call
# nor set_attr; the vector envs hpcrl builds (Sync/AsyncVectorEnv, the EnvPool adapter,
# DemoSlots) take a seed per env and have both. These three helpers are where that gap is
# crossed (one type: ignore each).
def reset_seeded(envs: gym.vector.VectorEnv, seeds: list[Any], options: Any = None
                 ) -> tuple[Any, dict[str, Any]]:
    """``envs.reset`` with one seed per env (what Sync/AsyncVectorEnv.reset accept)."""
    return envs.reset(seed=seeds, options=options)  # type: ignore[arg-type]


def vector_call(envs: gym.vector.VectorEnv | EnvStates, name: str, *args: Any,
                **kwargs: Any) -> tuple[Any, ...]:
    """``envs.call(name, *args, **kwargs)``: each env's ``name`` (called with them when it
    is a method)."""
    return envs.call(name, *args, **kwargs)  # type: ignore[union-attr]


def vector_set_attr(envs: gym.vector.VectorEnv | EnvStates, name: str, values: Any) -> None:
    """``envs.set_attr(name, values)``: one value per env."""
    envs.set_attr(name, values)  # type: ignore[union-attr]


class EnvStates(Protocol):
    """What capturing and restoring env states asks of a vector env (or of a collector's
    groups of them, :class:`~hpcrl.envs.groups.EnvGroups`): its env count, and ``call``
    and ``set_attr`` over its envs."""

    num_envs: int

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """``name`` of every env, called when it is a method."""
        ...

    def set_attr(self, name: str, values: Any) -> None:
        """Set ``name`` on every env, one value each."""
        ...


def vector_env_state(envs: gym.vector.VectorEnv | EnvStates) -> tuple[list[dict], list[str]]:
    """Per-env plain states and the attributes that could not be captured."""
    states = list(vector_call(envs, "hpcrl_state"))
    missing = sorted({m for s in states for m in s["missing"]})
    return states, missing


def restore_vector_env_state(envs: gym.vector.VectorEnv | EnvStates,
                             states: list[dict]) -> None:
    """Restore per-env states saved by :func:`vector_env_state`."""
    if len(states) != envs.num_envs:
        raise ValueError(f"checkpoint holds the state of {len(states)} envs but this process "
                         f"runs {envs.num_envs}: env.num_envs or the scheme changed")
    vector_set_attr(envs, "hpcrl_state", states)

