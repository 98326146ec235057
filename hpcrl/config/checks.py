"""The message-making primitives every config check uses: one wording for a bound, for a key
that nothing reads, for a feature that needs a feedforward actor, and for the algorithms
that offer a capability."""
from __future__ import annotations

from collections.abc import Callable

from hpcrl.config.schema import Config
from hpcrl.core.algorithms import algorithms_with as named
from hpcrl.core.algorithms.capabilities import Capabilities


def positive(key: str, value: float, strict: bool = True) -> str | None:
    """The refusal of ``key`` unless ``value`` > 0 (>= 0 when not ``strict``), or None."""
    if (value <= 0) if strict else (value < 0):
        bound = "> 0" if strict else ">= 0"
        return f"config key '{key}' must be {bound}, got {value}"
    return None


def in_unit(key: str, value: float, low_open: bool = False) -> str | None:
    """The refusal of ``key`` unless ``value`` lies in [0, 1] ((0, 1] with ``low_open``)."""
    if not (0.0 < value <= 1.0 if low_open else 0.0 <= value <= 1.0):
        interval = "(0, 1]" if low_open else "[0, 1]"
        return f"config key '{key}' must lie in {interval}, got {value}"
    return None


def unread(section: str, values: object, keys: list[str], reader: str, fix: str
            ) -> list[str]:
    """The refusal of the first of ``keys`` set away from its default while ``reader``, the
    feature that reads them, is off (a key that would be silently ignored)."""
    defaults = type(values)()
    unread = [key for key in keys if getattr(values, key) != getattr(defaults, key)]
    return [f"config key '{section}.{unread[0]}' is read by {reader} only; {fix}, or drop "
            f"the key"] if unread else []


def recomputed_from_observations(c: Config, key: str, what: str, feature: str) -> str:
    """Why ``feature``, whose learner recomputes ``what`` from stored observations, refuses
    a recurrent actor."""
    return (f"config key '{key}': the learner recomputes {what} from the stored "
            f"observations, which a recurrent actor (actor.memory={c.actor.memory}) cannot do "
            f"without its states; use actor.memory=none with {feature} (frame stacking gives "
            f"the agent a short memory)")


def algorithms_with(test: Callable[[Capabilities], bool]) -> str:
    """The built-in algorithms whose declared capabilities pass ``test``, as a list in words
    (the choices a refusal offers)."""
    return ", ".join(named(test))
