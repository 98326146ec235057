"""Human-readable views of a resolved config, for ``hpcrl config show``: the YAML with the
keys that came from the algorithm's defaults (or a preset's agent) marked, and every key
with its documentation."""
from __future__ import annotations

import dataclasses
import textwrap
import typing
from collections.abc import Mapping
from typing import Any

from hpcrl.config.loader import dump_yaml

Sources = Mapping[str, str]  # dotted key -> where its value came from


def _lines(obj: Any, prefix: str, notes: Sources) -> list[str]:
    out: list[str] = []
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        key = prefix + f.name
        if dataclasses.is_dataclass(hints[f.name]):
            out.extend(_lines(value, key + ".", notes))
            continue
        note = f"  (from {notes[key]})" if key in notes else ""
        out.append(f"{key} = {value!r}{note}")
        out.extend(textwrap.wrap(f.metadata.get("doc", ""), 88, initial_indent="    ",
                                 subsequent_indent="    "))
    return out


def describe(config: Any, sources: Sources | None = None) -> str:
    """``key = value`` lines, each followed by the key's documentation; a key in ``sources``
    (see :func:`hpcrl.config.loader.resolve`) is marked with where its value came from."""
    header = (f"# algo.name={config.algo.name}: keys marked 'from algo {config.algo.name} "
              f"defaults' take that algorithm's standard value (hpcrl/config/algo_defaults.py); "
              f"a key you set wins.")
    return "\n".join([header, *_lines(config, "", sources or {})])


def annotated_yaml(config: Any, sources: Sources | None = None) -> str:
    """The resolved config as YAML, with a ``# from algo NAME defaults`` (or ``# from preset
    NAME``) comment on each key in ``sources``; the text still loads to the same config."""
    notes = {key: f"from {source}" for key, source in (sources or {}).items()}
    out: list[str] = []
    path: list[str] = []  # the sections above the current line, one per 2 spaces of indent
    for line in dump_yaml(config).splitlines():
        indent = len(line) - len(line.lstrip(" "))
        name = line.strip().split(":", 1)[0]
        if line.lstrip().startswith("- ") or ":" not in line:  # an item of a list value
            out.append(line)
            continue
        path = path[:indent // 2] + [name]
        note = notes.get(".".join(path))
        out.append(f"{line}  # {note}" if note else line)
    return "\n".join(out) + "\n"
