"""Capture and restore the state of a Gymnasium env as plain data, for exact resumes.

A checkpoint must load with ``torch.load(weights_only=True)``, so env state cannot be pickled
objects. Instead every layer of the wrapper chain is read attribute by attribute: numbers,
strings, numpy scalars, arrays and dtypes (tagged with their dtype, so a resume gets the same
numpy types back) and numpy random generators (by their bit-generator state) are kept;
spaces, specs and constructor arguments are configuration and are skipped. An env may also
define ``get_state() -> dict`` and ``set_state(dict)`` with plain values to take over.

If a layer holds anything else (a simulator handle, say), the state is marked inexact and
:func:`capture_env_state` names the attributes, so a resume can say it reset those envs.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

# Attributes that describe how an env was built, not where it is.
_CONFIG_ATTRS = frozenset({
    "env", "_saved_kwargs", "spec", "_cached_spec", "metadata", "_metadata", "render_mode",
    "action_space", "observation_space", "_action_space", "_observation_space",
    "single_action_space", "single_observation_space", "screen", "clock", "_previous_data",
})


class Uncapturable(Exception):
    """A value that has no plain-data form."""


# Types kept as they are. Checked by exact type: numpy's float64 and str_ subclass float and
# str but pickle as numpy objects, which ``torch.load(weights_only=True)`` refuses.
_PLAIN_TYPES = (type(None), bool, int, float, complex, str)
# Numpy dtype kinds that have a tensor (arrays) or Python number (scalars) form:
# booleans, signed and unsigned integers, floats and complex numbers.
_NUMERIC_KINDS = "biufc"


def _dtype_name(dtype: np.dtype) -> str:
    """``str(dtype)``, refused when it does not name ``dtype`` back (structured dtypes)."""
    name = str(dtype)
    try:
        if np.dtype(name) == dtype:
            return name
    except TypeError:
        pass
    raise Uncapturable(f"numpy dtype {dtype!r} has no plain name")


def to_plain(value: Any) -> Any:
    """Encode ``value`` with only types that ``torch.load(weights_only=True)`` accepts.

    Numpy scalars, arrays, dtypes and scalar types are tagged with their dtype so that
    :func:`from_plain` gives back the same numpy types; raises :class:`Uncapturable`
    naming the type of anything that has no plain form.
    """
    if type(value) in _PLAIN_TYPES:
        return value
    if isinstance(value, np.generic):
        if value.dtype.kind not in _NUMERIC_KINDS + "U":
            raise Uncapturable(f"numpy scalar of dtype {value.dtype}")
        return {"__npscalar__": value.item(), "dtype": _dtype_name(value.dtype)}
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in _NUMERIC_KINDS:
            raise Uncapturable(f"array of dtype {value.dtype}")
        # (ascontiguousarray makes a 0-d array 1-d: the shape is put back)
        native = np.ascontiguousarray(value, dtype=value.dtype.newbyteorder("=")).reshape(
            value.shape)
        return {"__ndarray__": torch.from_numpy(native.copy()), "dtype": _dtype_name(value.dtype)}
    if isinstance(value, np.dtype):
        return {"__npdtype__": _dtype_name(value)}
    if isinstance(value, type) and issubclass(value, np.generic):
        return {"__nptype__": _dtype_name(np.dtype(value))}
    if isinstance(value, np.random.Generator):
        return {"__generator__": to_plain(value.bit_generator.state)}
    if isinstance(value, tuple):
        return {"__tuple__": [to_plain(v) for v in value]}
    if isinstance(value, list):
        return [to_plain(v) for v in value]
    if isinstance(value, dict) and all(type(k) is str for k in value):
        return {"__dict__": {k: to_plain(v) for k, v in value.items()}}
    raise Uncapturable(type(value).__name__)


def from_plain(value: Any, current: Any = None) -> Any:
    """Decode :func:`to_plain`; a generator is restored into ``current`` when it is one."""
    if isinstance(value, list):
        return [from_plain(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "__ndarray__" in value:
        return value["__ndarray__"].numpy().astype(value["dtype"], copy=True)
    if "__npscalar__" in value:
        return np.dtype(value["dtype"]).type(value["__npscalar__"])
    if "__npdtype__" in value:
        return np.dtype(value["__npdtype__"])
    if "__nptype__" in value:
        return np.dtype(value["__nptype__"]).type
    if "__generator__" in value:
        state = value["__generator__"]
        if "__dict__" in state:  # older checkpoints hold the state dict unencoded
            state = from_plain(state)
        gen = current if isinstance(current, np.random.Generator) else np.random.Generator(
            getattr(np.random, state["bit_generator"])())
        gen.bit_generator.state = state
        return gen
    if "__tuple__" in value:
        return tuple(from_plain(v) for v in value["__tuple__"])
    return {k: from_plain(v) for k, v in value["__dict__"].items()}


def _layers(env: gym.Env) -> list[Any]:
    layers = []
    node: Any = env
    while node is not None:
        layers.append(node)
        node = getattr(node, "env", None) if isinstance(node, gym.Wrapper) else None
    return layers


def capture_env_state(env: gym.Env) -> tuple[list[dict], list[str]]:
    """The plain state of each layer of ``env`` and the attributes that could not be kept."""
    states: list[dict] = []
    missing: list[str] = []
    for layer in _layers(env):
        name = type(layer).__name__
        own = type(layer).__dict__
        if "get_state" in own and "set_state" in own:
            states.append({"custom": to_plain(layer.get_state())})
            break
        layer_state: dict[str, Any] = {}
        for key, value in vars(layer).items():
            if key in _CONFIG_ATTRS or isinstance(value, (gym.Space,
                                                          gym.envs.registration.EnvSpec)):
                continue
            try:
                layer_state[key] = to_plain(value)
            except Uncapturable as why:
                missing.append(f"{name}.{key} ({why})")
        states.append({"attrs": layer_state})
    return states, missing


def restore_env_state(env: gym.Env, states: list[dict]) -> None:
    """Put back a state from :func:`capture_env_state` into an env built the same way."""
    layers = _layers(env)
    if len(states) > len(layers):
        raise ValueError(f"saved env state has {len(states)} wrapper layers but the env has "
                         f"{len(layers)}: the env or its wrappers changed since the checkpoint")
    for layer, state in zip(layers, states, strict=True):
        if "custom" in state:
            layer.set_state(from_plain(state["custom"]))
            return
        for key, value in state["attrs"].items():
            setattr(layer, key, from_plain(value, getattr(layer, key, None)))
