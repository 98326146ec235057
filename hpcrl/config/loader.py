"""Build a :class:`Config` from YAML text and ``KEY=VALUE`` overrides, with clear errors.

Errors name the dotted key at fault; an unknown key also names the closest valid key.
"""
from __future__ import annotations

import dataclasses
import difflib
import types
import typing
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from hpcrl.config.algo_defaults import (
    algorithm_kind_of,
    algorithm_type_of,
    builtin_kind,
    builtin_sections,
    fill_algo_defaults,
    name_of,
    section_name_of,
)
from hpcrl.config.algo_sections import move_flat_keys
from hpcrl.config.foreign_names import foreign_hint
from hpcrl.errors import ConfigError
from hpcrl.scheme.presets import apply_preset, apply_preset_agent
from hpcrl.sections.schema import AlgoConfig, Config

__all__ = ["ConfigError", "all_keys", "dump_yaml", "from_dict", "load_config",
           "load_config_sources", "merge", "parse_overrides", "read_yaml", "resolve", "to_dict"]


def all_keys(cls: type = Config, prefix: str = "") -> list[str]:
    """Every dotted leaf key of a config dataclass, e.g. ``algo.lr``."""
    keys: list[str] = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        name = prefix + f.name
        if dataclasses.is_dataclass(hints[f.name]):
            keys.extend(all_keys(hints[f.name], name + "."))
        else:
            keys.append(name)
    return keys


def _unknown_key(key: str) -> ConfigError:
    """The refusal of ``key``, with the key meant: another library's name for one of
    hpcrl's (:mod:`~hpcrl.config.foreign_names`), the same name in another section, or
    the closest key by spelling, in that order."""
    leaf = key.rsplit(".", 1)[-1]
    hint = foreign_hint(key)
    if hint is None:
        close = ([k for k in all_keys() if k.rsplit(".", 1)[-1] == leaf][:1]
                 or difflib.get_close_matches(key, all_keys(), n=1, cutoff=0.5))
        hint = f"did you mean '{close[0]}'?" if close else None
    return ConfigError(f"unknown config key '{key}'{'; ' + hint if hint else ''} "
                       f"(`hpcrl config show` lists the valid keys)")


def _first_leaf(key: str, value: Any) -> str:
    """The full dotted key of the first leaf under ``key`` (names a mistyped section)."""
    while isinstance(value, Mapping) and value:
        sub, value = next(iter(value.items()))
        key = f"{key}.{sub}"
    return key


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _number(text: str) -> Any:
    try:
        return float(text.replace("_", ""))
    except ValueError:
        return text


def _coerce(key: str, value: Any, tp: Any) -> Any:
    """Check ``value`` against the annotation ``tp`` and return it in that type."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None:
            return None
        return _coerce(key, value, args[0])
    if origin is typing.Literal:
        choices = typing.get_args(tp)
        if value not in choices:
            raise ConfigError(f"config key '{key}' must be one of {list(choices)}, got {value!r}")
        return value
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"config key '{key}' must be true or false, got {value!r}")
    if tp in (int, float) and isinstance(value, str):
        value = _number(value)  # YAML 1.1 reads '3e-4' as a string
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value:
            raise ConfigError(f"config key '{key}' must be an integer, got {value!r}")
        return int(value)
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"config key '{key}' must be a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"config key '{key}' must be a string, got {value!r}")
        return value
    if tp is list or origin is list:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"config key '{key}' must be a list, got {value!r}")
        return list(value)
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"config key '{key}' must be a list, got {value!r}")
        item = typing.get_args(tp)[0]
        return tuple(_coerce(f"{key}[{i}]", v, item) for i, v in enumerate(value))
    if tp is dict or origin is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(f"config key '{key}' must be a mapping, got {value!r}")
        entry = (typing.get_args(tp) or (str, Any))[1]
        if isinstance(entry, type) and dataclasses.is_dataclass(entry):
            return {name: _dataclass_entry(f"{key}.{name}", item, entry)
                    for name, item in value.items()}
        return dict(value)
    raise ConfigError(f"config key '{key}' has an unsupported type {_type_name(tp)}")


def _dataclass_entry(key: str, value: Any, cls: type) -> Any:
    """One entry of a mapping of named sections (``pbt.mutate.algo.lr``): ``cls`` from
    ``value``, every problem of it raised as one error."""
    problems: list[str] = []
    built = _build(cls, value, key + ".", problems)
    if problems:
        raise ConfigError("; ".join(problems))
    return built


def _build(cls: type, data: Mapping[str, Any], prefix: str, problems: list[str]) -> Any:
    """``cls`` from ``data``; each unknown key, wrong type or value is added to
    ``problems`` (and left at its default) so that one pass finds them all."""
    if not isinstance(data, Mapping):
        problems.append(f"config section '{prefix.rstrip('.') or '<root>'}' must be a mapping, "
                        f"got {data!r}")
        return cls()
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    kwargs = {}
    for name, value in data.items():
        if name not in names:
            problems.append(str(_unknown_key(_first_leaf(prefix + str(name), value))))
            continue
        tp = hints[name]
        try:
            kwargs[name] = (_build(tp, value, prefix + name + ".", problems)
                            if isinstance(tp, type) and dataclasses.is_dataclass(tp)
                            else _coerce(prefix + name, value, tp))
        except ConfigError as err:
            problems.append(str(err))
    return cls(**kwargs)


def to_dict(config: Any) -> dict[str, Any]:
    """The config as plain nested dicts, lists and scalars (YAML- and checkpoint-safe), a
    plug-in algorithm's own section (``algo.<section>``) included."""
    data = dataclasses.asdict(config)
    if isinstance(config, Config):
        fields = {f.name for f in dataclasses.fields(config.algo)}
        data["algo"].update((name, dataclasses.asdict(value))
                            for name, value in vars(config.algo).items()
                            if name not in fields and dataclasses.is_dataclass(value)
                            and not isinstance(value, type))
    return data


def _plugin_section(merged: dict[str, Any], problems: list[str]
                    ) -> tuple[dict[str, Any], tuple[str, Any] | None]:
    """``merged`` without the algorithm's own section where its class declares keys the
    schema does not hold (``section_keys``: a plug-in's), and that section built from them
    (defaults filled) as ``(name, value)``; problems of its keys go to ``problems``. None
    for an algorithm whose section the schema holds (a built-in's, which the schema
    documents: the same name and keys), or with no keys of its own (or an unknown name, or
    a plug-in that cannot be loaded: the config check reports it)."""
    algo = merged.get("algo")
    name = name_of(merged)
    cls = algorithm_type_of(name) if isinstance(name, str) else None
    if cls is None or cls.section_keys is None:
        return merged, None
    keys, section = cls.section_keys, cls.section_name()
    if typing.get_type_hints(AlgoConfig).get(section) is keys:
        return merged, None
    if section in {f.name for f in dataclasses.fields(AlgoConfig)} or hasattr(AlgoConfig, section):
        problems.append(f"config key 'algo.name' ({name}): {cls.__name__}.section is "
                        f"{section!r}, a name hpcrl's algo section holds already; name its "
                        f"own section otherwise")
        return merged, None
    own = algo if isinstance(algo, Mapping) else {}
    rest = {k: v for k, v in own.items() if k != section}
    return {**merged, "algo": rest}, (section, _build(keys, own.get(section, {}),
                                                      f"algo.{section}.", problems))


def parse_overrides(pairs: Iterable[str]) -> dict[str, Any]:
    """Parse ``KEY=VALUE`` strings into a nested dict; values are read as YAML scalars."""
    nested: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            raise ConfigError(f"override '{pair}' is not of the form KEY=VALUE "
                              f"(e.g. --set algo.lr=3e-4)")
        key, raw = pair.split("=", 1)
        key = key.strip()
        if not key:
            raise ConfigError(f"override '{pair}' has an empty key")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError as err:
            raise ConfigError(f"override '{pair}': value is not valid YAML ({err})") from None
        node = nested
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override '{pair}' sets a key below the value '{part}'")
        node[parts[-1]] = value
    return nested


def merge(base: dict[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """Recursively merge ``update`` into a copy of ``base`` (update wins)."""
    out = dict(base)
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def read_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML config file into a dict (an empty file is an empty config)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file '{path}' does not exist")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"config file '{path}' is not valid YAML: {err}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file '{path}' must hold a mapping of sections, got "
                          f"{type(data).__name__}")
    return data


def _added_keys(before: Any, after: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Dotted leaf keys (``algo.dqn.double_q``) that ``after`` holds and ``before`` did not."""
    added = []
    for key, value in after.items():
        own = before.get(key) if isinstance(before, Mapping) else None
        if isinstance(value, Mapping):
            added += _added_keys(own, value, f"{prefix}{key}.")
        elif not (isinstance(before, Mapping) and key in before):
            added.append(f"{prefix}{key}")
    return added


def _with_preset(merged: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """``merged`` with its scheme preset applied (the topology, and the agent a named
    architecture stands for under the keys ``merged`` leaves unset), and the keys the
    agent added -> ``'preset NAME'``."""
    if not isinstance(merged.get("scheme"), Mapping):
        return merged, {}
    merged = {**merged, "scheme": apply_preset(dict(merged["scheme"]))}
    before, merged = merged, apply_preset_agent(merged, algorithm_kind_of, builtin_sections(),
                                                section_name_of)
    preset = merged["scheme"].get("preset")
    return merged, {key: f"preset {preset}" for key in _added_keys(before, merged)
                    if not key.startswith("scheme.")}


def resolve(data: Mapping[str, Any], overrides: Iterable[str] = (), *,
            saved: bool = False) -> tuple[Config, dict[str, str]]:
    """A validated :class:`Config` from a nested dict plus ``KEY=VALUE`` overrides, and where
    each defaulted key came from: dotted key -> ``'preset NAME'`` (the agent of a named
    architecture's preset) or ``'algo NAME defaults'``.

    Precedence, highest first: the overrides, ``data``, the scheme preset (its topology and
    the agent a named architecture stands for, which may set ``algo.name``), the chosen
    algorithm's defaults (:mod:`hpcrl.config.algo_defaults`), the field defaults. A fully
    specified config (a run directory's ``config.yaml``) is left exactly as it is.

    Keys of before the algorithms' own sections (``algo.clip_range``,
    ``replay.policy_delay``) are read where they moved, with a ``FutureWarning`` naming the
    new names; ``saved`` marks a config an earlier run wrote (its ``config.yaml`` or a
    checkpoint's), whose keys of other algorithms are dropped unread, as that run did
    (:func:`~hpcrl.config.algo_sections.move_flat_keys`).
    """
    sets = parse_overrides(overrides)
    kind = algorithm_kind_of(_with_preset(merge(dict(data), sets))[0])
    data, moved = move_flat_keys(data, kind, saved=saved)
    sets, moved_sets = move_flat_keys(sets, kind)
    if moved_sets or (moved and not saved):
        warnings.warn("hpcrl: config keys moved to their algorithm's section, read there: "
                      + ", ".join(f"{old} -> {new}"
                                  for old, new in [*([] if saved else moved), *moved_sets])
                      + "; write the new names (the old ones will stop loading)",
                      FutureWarning, stacklevel=2)
    merged, sources = _with_preset(merge(data, sets))
    merged, from_algo = fill_algo_defaults(merged)
    problems: list[str] = []
    merged, section = _plugin_section(merged, problems)
    config = _build(Config, merged, "", problems)
    if section is not None:  # a plug-in's own keys: read through own_section(config.algo)
        setattr(config.algo, *section)
    # the checks read the algorithms' capabilities and the scheme's topology (core and
    # scheme, torch and gymnasium with them): imported when a config is checked, so that
    # importing the loader (`hpcrl --help`, `hpcrl runs`) stays light
    from hpcrl.config.validate import problems_message, validate

    problem = problems_message(problems) or validate(config)
    if problem is not None:
        raise ConfigError(problem)
    sources.update((key, f"algo {config.algo.name} defaults") for key in from_algo)
    return config, sources


def from_dict(data: Mapping[str, Any], overrides: Iterable[str] = (), *,
              saved: bool = False) -> Config:
    """A validated :class:`Config` from a nested dict plus ``KEY=VALUE`` overrides
    (``saved``: a config an earlier run wrote, see :func:`resolve`)."""
    return resolve(data, overrides, saved=saved)[0]


def load_config_sources(path: str | Path | None = None,
                        overrides: Iterable[str] = ()) -> tuple[Config, dict[str, str]]:
    """:func:`load_config` and where each defaulted key came from (see :func:`resolve`)."""
    data = read_yaml(path) if path is not None else {}
    return resolve(data, overrides)


def load_config(path: str | Path | None = None, overrides: Iterable[str] = ()) -> Config:
    """The run's config: defaults (the algorithm's, then the fields'), then the YAML file
    (if any), then the overrides."""
    return load_config_sources(path, overrides)[0]


def dump_yaml(config: Config) -> str:
    """The resolved config as YAML text, in field order, with the run's own algorithm
    section and none of the others' (they hold their defaults: validation refuses any
    other value, and loading the text gives them back)."""
    data, sections = to_dict(config), builtin_sections()
    cls = algorithm_type_of(config.algo.name)
    own = cls.section_name() if cls is not None else builtin_kind(config.algo.name)
    data["algo"] = {key: value for key, value in data["algo"].items()
                    if key not in sections or key == own}
    return yaml.safe_dump(data, sort_keys=False)
