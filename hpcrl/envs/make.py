"""The one function that builds every env hpcrl steps, :func:`make_env` (its suite
registered, its preprocessing chain, its suite's own wrapper, the user's ``env.wrappers``),
and the checks of ``env.preset`` and ``env.wrappers``.

Which suites there are, and how an id finds its own, is :mod:`hpcrl.envs.suites`.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from hpcrl.components.import_paths import CONTRACTS, PluginError, component_factory, failure
from hpcrl.envs.atari_preprocessing import LIFE_LOST, atari_env
from hpcrl.envs.multiagent.joint_agents import JointAgentsEnv
from hpcrl.envs.multiagent.play_modes import SHARED, agents_mode, is_multiagent
from hpcrl.envs.noise import quiet_mujoco
from hpcrl.envs.suites.atari import ATARI
from hpcrl.envs.suites.suite_ids import adapt_env, register_suite
from hpcrl.envs.vizdoom_preset import vizdoom_env, vizdoom_problem
from hpcrl.errors import ConfigError, ExplainedError
from hpcrl.sections.schema import EnvConfig

WRAPPER_CALL = "Class(env, **kwargs)"


def _entry_point_starts(env_id: str, prefix: str) -> bool:
    """Whether ``env_id``'s registered entry point is a path starting with ``prefix``."""
    try:
        entry = gym.spec(env_id.rpartition(":")[2]).entry_point
    except gym.error.Error:
        return False
    return isinstance(entry, str) and entry.startswith(prefix)


def is_atari(env_id: str) -> bool:
    """Whether ``env_id`` is an ALE (ale-py) env, once its suite is registered."""
    return _entry_point_starts(env_id, "ale_py")


def is_mujoco(env_id: str) -> bool:
    """Whether ``env_id`` is one of Gymnasium's MuJoCo envs (its model files)."""
    return _entry_point_starts(env_id, "gymnasium.envs.mujoco")


SELFPLAY_ID = "hpcrl/SelfPlay-v0"
def shared_agents_env(config: EnvConfig) -> JointAgentsEnv:
    """The game of ``env.id`` with all its agents at once, for one shared policy
    (:class:`~hpcrl.envs.multiagent.joint_agents.JointAgentsEnv`)."""
    return JointAgentsEnv(config.id, dict(config.kwargs))


def selfplay_env(config: EnvConfig, evaluation: bool = False) -> gym.Env:
    """The game of ``env.id`` seen from the trained policy, its other seats played by the
    league of ``env.league`` (:class:`~hpcrl.league.selfplay_env.SelfPlayEnv`, registered by
    import path: the env layer does not import the league); an evaluation env plays
    ``env.league.eval_opponent`` in every match."""
    if SELFPLAY_ID not in gym.registry:
        gym.register(SELFPLAY_ID, entry_point="hpcrl.league.selfplay_env:SelfPlayEnv",
                     disable_env_checker=True)
    league = config.league
    return gym.make(SELFPLAY_ID, game=config.id, game_kwargs=dict(config.kwargs),
                    opponents=league.opponents, pfsp_weighting=league.pfsp_weighting,
                    latest_fraction=league.latest_fraction, player=league.player,
                    versus=tuple(league.versus),
                    opponent=league.eval_opponent if evaluation else "")


def make_env(config: EnvConfig, whole_games: bool = False) -> gym.Env:
    """The env of ``config`` with its preprocessing chain (``env.preset``).

    ``whole_games=True`` makes the evaluation env: the same observations, but episodes are
    whole games with the game's own rewards (no life-loss termination, no reward clipping).
    """
    if is_multiagent(config):
        if agents_mode(config) == SHARED:
            return apply_wrappers(shared_agents_env(config), config)
        return apply_wrappers(selfplay_env(config, whole_games), config)
    problem = register_suite(config.id)
    if problem is not None:
        raise ConfigError(problem)
    if is_mujoco(config.id):
        quiet_mujoco()
    try:
        if config.preset == "atari":
            env = atari_env(config, whole_games)
        elif config.preset == "vizdoom":
            env = vizdoom_env(config)
        else:
            env = adapt_env(gym.make(config.id, **config.kwargs), config.id)
    except TypeError as err:
        if not config.kwargs:
            raise
        raise ConfigError(f"config key 'env.kwargs' ({config.kwargs}): env '{config.id}' does "
                          f"not take them: {str(err).split(' was raised from')[0]}; drop or "
                          f"rename the key (its keyword arguments are those of the env's "
                          f"constructor)") from None
    return apply_wrappers(env, config)


def wrapper_specs(config: EnvConfig) -> list[tuple[str, dict[str, Any]]]:
    """``env.wrappers`` as ``(import path, keyword arguments)`` pairs, in order."""
    specs: list[tuple[str, dict[str, Any]]] = []
    for item in config.wrappers:
        if isinstance(item, str):
            specs.append((item, {}))
        elif (isinstance(item, dict) and len(item) == 1
              and isinstance(next(iter(item.values())), dict)):
            path, kwargs = next(iter(item.items()))
            specs.append((str(path), dict(kwargs)))
        else:
            raise PluginError(f"config key 'env.wrappers': each entry is 'module:Class' or "
                              f"{{'module:Class': {{keyword: value}}}}, got {item!r}")
    return specs


def wrapper_factory(path: str) -> Any:
    """What an ``env.wrappers`` entry names, checked before it is called: a
    ``gymnasium.Wrapper`` class (or a function returning an env) that takes the env as its
    first argument."""
    return component_factory(path, "env.wrappers", gym.Env,
                             "a gymnasium.Wrapper subclass (or a function returning an env)",
                             WRAPPER_CALL)


def apply_wrappers(env: gym.Env, config: EnvConfig) -> gym.Env:
    """``env`` inside the user's ``env.wrappers``, the first one innermost; a wrapper that
    fails, or does not give back a Gymnasium env, is refused, naming it."""
    for path, kwargs in wrapper_specs(config):
        try:
            wrapped = wrapper_factory(path)(env, **kwargs)
        except ExplainedError:
            raise
        except Exception as err:  # the user's wrapper may fail in any way
            raise PluginError(f"config key 'env.wrappers' ({path}): building it as "
                              f"{WRAPPER_CALL} failed: {failure(err)}") from None
        if not isinstance(wrapped, gym.Env):
            raise PluginError(f"config key 'env.wrappers': {path}(env) returned "
                              f"{type(wrapped).__name__}, not a gymnasium.Env; a wrapper "
                              f"derives from gymnasium.Wrapper ({CONTRACTS})")
        env = wrapped
    return env


def preset_problem(config: EnvConfig) -> str | None:
    """Why ``config.preset`` cannot be applied to ``config.id`` (with the fix), or None.
    Call after :func:`register_suite`."""
    if config.preset != "vizdoom" and config.vizdoom != type(config.vizdoom)():
        return ("config keys 'env.vizdoom.*' are read by the vizdoom preprocessing chain "
                "only; set env.preset=vizdoom, or drop the env.vizdoom keys")
    if config.preset == "vizdoom":
        return vizdoom_problem(config)
    if config.preset != "atari":
        if config.atari != type(config.atari)():  # keys that only the atari chain reads
            return ("config keys 'env.atari.*' are read by the atari preprocessing chain only; "
                    "set env.preset=atari, or drop the env.atari keys")
        return None
    if not is_atari(config.id):
        return (f"config key 'env.preset': 'atari' preprocesses ALE games, but env.id="
                f"'{config.id}' is not one; use an id such as 'ALE/Pong-v5' or "
                f"'PongNoFrameskip-v4', or set env.preset=none")
    try:
        import cv2  # noqa: F401  (AtariPreprocessing resizes frames with it)
    except ImportError:
        return (f"config key 'env.preset': the atari chain resizes frames with OpenCV, "
                f"which is not installed; fix: {ATARI.install}")
    if "frameskip" in config.kwargs:
        return ("config key 'env.kwargs.frameskip': env.preset=atari skips frames itself "
                "(env.atari.frame_skip, max-pooling the last two); remove env.kwargs.frameskip")
    if ("repeat_action_probability" in config.kwargs
            and config.atari.repeat_action_probability is not None):
        return ("config keys 'env.kwargs.repeat_action_probability' and "
                "'env.atari.repeat_action_probability' both set sticky actions; keep one")
    return None


def game_episodes(info: dict[str, Any], done: np.ndarray, returns: np.ndarray,
                  lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return and length of the episode each env of a vector step ended (0 and 0 where none
    ended): the whole game's, as the env reports it in ``info["final_info"]["episode"]``,
    where it does; else ``returns`` and ``lengths``, the sums the caller kept. An episode
    that ended a life but not the game (``life_lost``) is no episode here: length 0.
    """
    final = info.get("final_info") or {}
    out_r = np.where(done, returns, 0.0)
    out_l = np.where(done, lengths, 0)
    if "_episode" in final:
        games = done & final["_episode"]
        out_r = np.where(games, final["episode"]["r"], out_r)
        out_l = np.where(games, final["episode"]["l"], out_l)
    if "_" + LIFE_LOST in final:
        lost = done & final["_" + LIFE_LOST]
        out_r, out_l = np.where(lost, 0.0, out_r), np.where(lost, 0, out_l)
    return out_r, out_l.astype(np.int64)
