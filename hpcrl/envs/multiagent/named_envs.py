"""A PettingZoo env from a name, and the seat adapter that fits its API.

A name is one of:

- a PettingZoo env module, ``pettingzoo.classic.connect_four_v3``: its ``parallel_env()``
  where it has one (simultaneous moves are stepped at once), else its ``env()``;
- a PettingZoo registry id, ``classic/connect_four-v3`` (PettingZoo 1.27 and later, which
  deprecates importing env modules): its Parallel form where registered, else its AEC form;
- ``module:function``, a function of the user's that returns a PettingZoo env, Parallel or
  AEC (``my_games.duel:make``);
- ``openspiel:<game>``, an OpenSpiel game through shimmy (``openspiel:tic_tac_toe``).

Every failure is a :class:`MultiAgentEnvError` that names the env, the problem and the fix.
"""
from __future__ import annotations

import functools
import importlib
import importlib.util
from collections.abc import Callable
from typing import Any

from hpcrl.envs.multiagent.aec import AECSeats, is_aec
from hpcrl.envs.multiagent.parallel import ParallelSeats
from hpcrl.envs.multiagent.seats import SeatEnv
from hpcrl.errors import ConfigError

EXTRA = "pip install 'hpcrl[multiagent]'"
OPENSPIEL_EXTRA = "pip install 'hpcrl[openspiel]'  (or 'shimmy[openspiel]')"
OPENSPIEL_PREFIX = "openspiel:"


class MultiAgentEnvError(ConfigError):
    """A multi-agent env that cannot be made; the message names the env and the fix."""


def _missing(name: str, err: ImportError) -> MultiAgentEnvError:
    """The error for an import of ``name``'s module that failed: the module itself is
    unknown, or a package it needs is not installed."""
    module = name.split(":", 1)[0]
    missing = getattr(err, "name", None)
    if missing and (module == missing or module.startswith(missing + ".")):
        return MultiAgentEnvError(
            f"multi-agent env '{name}': no module '{missing}' ({err}); fix: name a PettingZoo "
            f"env module (pettingzoo.classic.connect_four_v3), a 'module:function' that "
            f"returns a PettingZoo env, or 'openspiel:<game>', and check its spelling")
    parts = module.split(".")
    fix = (f"pip install 'pettingzoo[{parts[1]}]'" if parts[0] == "pettingzoo" and len(parts) > 2
           else f"install the package that provides '{missing}'")
    return MultiAgentEnvError(f"multi-agent env '{name}' cannot import what it needs ({err}); "
                              f"fix: {fix}")


def _module_factory(name: str) -> Callable[..., Any]:
    """The function a name of a module (or ``module:function``) makes its env with."""
    module_name, _, function = name.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise _missing(name, err) from None
    candidates = (function,) if function else ("parallel_env", "env")
    for attr in candidates:
        factory = getattr(module, attr, None)
        if callable(factory):
            return factory
    wanted = f"no function '{function}'" if function else "neither parallel_env() nor env()"
    raise MultiAgentEnvError(f"multi-agent env '{name}': module '{module_name}' has {wanted}; "
                             f"fix: name a PettingZoo env module or a 'module:function' that "
                             f"returns a PettingZoo env")


def _openspiel_factory(name: str) -> Callable[..., Any]:
    """The function that makes OpenSpiel's game ``name`` (``openspiel:<game>``) as an AEC env."""
    try:
        from shimmy import OpenSpielCompatibilityV0
    except ImportError as err:
        raise MultiAgentEnvError(f"multi-agent env '{name}' needs OpenSpiel and shimmy ({err}); "
                                 f"fix: {OPENSPIEL_EXTRA}") from None
    game = name.removeprefix(OPENSPIEL_PREFIX)

    def make(**kwargs: Any) -> Any:
        try:
            return OpenSpielCompatibilityV0(game_name=game, **kwargs)
        except Exception as err:  # pyspiel raises its own errors for unknown games
            raise MultiAgentEnvError(
                f"multi-agent env '{name}': OpenSpiel cannot load game '{game}' ({err}); the "
                f"games: python -c 'import pyspiel; print(pyspiel.registered_names())'") from None
    return make


def _registry_factory(name: str) -> Callable[..., Any]:
    """The function that makes registry id ``name`` (``classic/connect_four-v3``)."""
    pettingzoo = importlib.import_module("pettingzoo")
    make = getattr(pettingzoo, "make", None)
    if make is None:
        raise MultiAgentEnvError(f"multi-agent env '{name}' is a registry id, which needs "
                                 f"PettingZoo 1.27 or later; fix: pip install -U pettingzoo, or "
                                 f"name the env's module (pettingzoo.classic.connect_four_v3)")
    for kind in ("parallel", "aec"):
        if name in getattr(pettingzoo, f"{kind}_registry", {}):
            return functools.partial(make, kind, name)
    raise MultiAgentEnvError(f"multi-agent env '{name}' is not in PettingZoo's registry; the ids: "
                             f"python -c 'import pettingzoo; pettingzoo.pprint_registry()'")


def env_factory(name: str) -> Callable[..., Any]:
    """The function that makes env ``name`` (keyword arguments go to it), checking on the
    way that PettingZoo is installed and the name resolves; a :class:`MultiAgentEnvError`
    otherwise."""
    if importlib.util.find_spec("pettingzoo") is None:
        raise MultiAgentEnvError(f"multi-agent env '{name}' needs PettingZoo, which is not "
                                 f"installed; fix: {EXTRA}")
    if name.startswith(OPENSPIEL_PREFIX):
        return _openspiel_factory(name)
    if "/" in name and ":" not in name:
        return _registry_factory(name)
    return _module_factory(name)


def multiagent_env_problem(name: str) -> str | None:
    """Why env ``name`` cannot be made, or None (what a config check will ask)."""
    try:
        env_factory(name)
    except MultiAgentEnvError as err:
        return str(err)
    return None


def make_pettingzoo(name: str, **kwargs: Any) -> Any:
    """PettingZoo env ``name`` (Parallel or AEC), made with ``kwargs``."""
    env = env_factory(name)(**kwargs)
    if not hasattr(env, "possible_agents") or not callable(getattr(env, "step", None)):
        raise MultiAgentEnvError(f"multi-agent env '{name}' made a {type(env).__name__}, not a "
                                 f"PettingZoo env (Parallel or AEC, with possible_agents); fix: "
                                 f"return pettingzoo's ParallelEnv or AECEnv")
    return env


def adapt(env: Any, seed: int, env_index: int = 0) -> SeatEnv:
    """The seat adapter for a PettingZoo ``env``: AEC (turn-based) or Parallel, by its API;
    ``env_index`` is its global index in the job and ``seed`` the job's env seed."""
    kind = AECSeats if is_aec(env) else ParallelSeats
    return kind(env, seed, env_index)


def make_seat_env(name: str, seed: int, env_index: int = 0, **kwargs: Any) -> SeatEnv:
    """Env ``name`` made with ``kwargs`` and adapted to seats (:func:`adapt`)."""
    return adapt(make_pettingzoo(name, **kwargs), seed, env_index)
