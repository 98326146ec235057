"""Every config key with its value and documentation, for ``hpcrl config show --docs``."""
from __future__ import annotations

import dataclasses
import textwrap
import typing
from typing import Any


def _lines(obj: Any, prefix: str) -> list[str]:
    out: list[str] = []
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        key = prefix + f.name
        if dataclasses.is_dataclass(hints[f.name]):
            out.extend(_lines(value, key + "."))
            continue
        out.append(f"{key} = {value!r}")
        out.extend(textwrap.wrap(f.metadata.get("doc", ""), 88, initial_indent="    ",
                                 subsequent_indent="    "))
    return out


def describe(config: Any) -> str:
    """``key = value`` lines, each followed by the key's documentation."""
    return "\n".join(_lines(config, ""))
