"""The one way a config field is declared: a default and the documentation that ``hpcrl
config show --docs``, the docs site and the error messages quote.

It sits below every layer, so that the config's data (:mod:`hpcrl.sections`: the schema
and the algorithms' own sections) and a plug-in's own section declare their keys alike. It
is the one module of the name (formerly ``hpcrl.fields``, re-exported as
``hpcrl.config.fields``)."""
from __future__ import annotations

from dataclasses import field
from typing import Any

__all__ = ["doc"]


def doc(text: str, default: Any = None, *, factory: Any = None) -> Any:
    """A dataclass field with a default and a docstring kept in its metadata."""
    if factory is not None:
        return field(default_factory=factory, metadata={"doc": text})
    return field(default=default, metadata={"doc": text})
