"""Loading and checking each algorithm's own config section: ``algo.ppo``, ``algo.impala``,
``algo.dqn``, ``algo.ddpg``, ``algo.td3``, ``algo.sac``, ``algo.mpo``, ``algo.mpc``.

Keys that every algorithm of a family reads stay in the shared sections (``algo.gamma``,
``algo.lr``, ``replay.batch_size``, ...); a key that one algorithm reads lives in that
algorithm's section, whose field defaults are that algorithm's standard values. Each
algorithm's class names its section and the dataclass of its keys (``PPO.section = "ppo"``,
``PPO.section_keys = PpoConfig``; a built-in's dataclass is the config's data, in
:mod:`hpcrl.sections.algorithm_keys`, which its folder's package re-exports). A run reads
the section its algorithm's class declares (``section_name()``: a plug-in subclass of
``hpcrl.TD3`` takes its settings from ``algo.td3``, unless it declares a section of its
own, whose keys the loader builds from the class's ``section_keys``). A section of another
algorithm set away from its defaults is refused (:func:`unread_section_problem`): it would
be ignored.

Before sections, these keys were flat (``algo.clip_range``, ``replay.policy_delay``,
``replay.mpo_epsilon``). :func:`move_flat_keys` reads them where they moved, so old YAML
files, ``--set`` lines and the ``config.yaml`` of earlier runs keep loading.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from hpcrl.config.algo_defaults import builtin_sections
from hpcrl.sections.algorithm_keys import (
    DdpgConfig,
    DqnConfig,
    ImpalaConfig,
    MpoConfig,
    PpoConfig,
    SacConfig,
    Td3Config,
)

__all__ = ["FLAT_NAMES", "move_flat_keys", "unread_section_problem"]

# History, frozen: the sections whose keys were flat before sections existed, with their
# keys (a later section has no old names)
_FLAT_ERA: dict[str, type] = {"ppo": PpoConfig, "impala": ImpalaConfig, "dqn": DqnConfig,
                              "ddpg": DdpgConfig, "td3": Td3Config, "sac": SacConfig,
                              "mpo": MpoConfig}


def _flat_names() -> dict[str, tuple[str, ...]]:
    """Each key's flat name before sections -> the sections' keys it became, owner first."""
    moved: dict[str, list[str]] = {}
    renamed = {"impala": {"clip_rho": "algo.vtrace_clip_rho", "clip_c": "algo.vtrace_clip_c"},
               "mpo": {f.name: f"replay.mpo_{f.name}" for f in dataclasses.fields(MpoConfig)
                       if f.name != "n_critics"}}
    for kind, cls in _FLAT_ERA.items():
        shared = "algo" if kind == "ppo" else "replay"
        for f in dataclasses.fields(cls):
            old = renamed.get(kind, {}).get(f.name, f"{shared}.{f.name}")
            moved.setdefault(old, []).append(f"algo.{kind}.{f.name}")
    return {old: tuple(new) for old, new in moved.items()}


#: ``algo.clip_range`` -> ``("algo.ppo.clip_range",)``; a key two algorithms read maps to
#: both (``replay.n_critics`` -> TD3's and SAC's), the run's own algorithm picks.
FLAT_NAMES: dict[str, tuple[str, ...]] = _flat_names()


def _get(data: Mapping[str, Any], dotted: str) -> tuple[bool, Any]:
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False, None
        node = node[part]
    return True, node


def _put(data: dict[str, Any], dotted: str, value: Any) -> None:
    *sections, leaf = dotted.split(".")
    node = data
    for part in sections:
        child = node.get(part)
        node[part] = dict(child) if isinstance(child, Mapping) else {}
        node = node[part]
    node[leaf] = value


def move_flat_keys(data: Mapping[str, Any], kind: str | None, *, saved: bool = False
                   ) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """``data`` with each flat key of before sections moved into its algorithm's section,
    and the ``(old, new)`` names moved.

    A key two sections share goes to the section of ``kind`` (the run's algorithm) when it
    is one of them, else to its first owner, where validation refuses it unless it holds
    the default. ``saved`` (a run's own ``config.yaml`` or checkpoint): a key of another
    algorithm's section is dropped instead, as the run that wrote it never read it. A key
    also given under its new name keeps the new name's value.
    """
    out = {name: dict(part) if isinstance(part, Mapping) else part
           for name, part in data.items()}
    moved: list[tuple[str, str]] = []
    for old, owners in FLAT_NAMES.items():
        section, leaf = old.split(".")
        part = out.get(section)
        if not isinstance(part, dict) or leaf not in part:
            continue
        value = part.pop(leaf)
        own = [new for new in owners if new.split(".")[1] == kind]
        if saved and not own:
            continue
        new = (own or list(owners))[0]
        if not _get(out, new)[0]:
            _put(out, new, value)
        moved.append((old, new))
    return out, moved


def unread_section_problem(algo: Any, own: str) -> str | None:
    """The refusal of a key of another algorithm's section than ``own`` (the section the
    run's algorithm reads, as its class declares) set away from its default (a setting the
    run would ignore), naming the algorithm that reads it."""
    for kind, cls in builtin_sections().items():
        if kind == own:
            continue
        section, defaults = getattr(algo, kind), cls()
        for f in dataclasses.fields(cls):
            if getattr(section, f.name) != getattr(defaults, f.name):
                return (f"config key 'algo.{kind}.{f.name}' is read by {kind} (and its "
                        f"plug-ins) only, but algo.name is {algo.name}; drop the key, or set "
                        f"algo.name={kind}")
    return None
