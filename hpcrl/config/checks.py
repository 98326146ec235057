"""The message-making primitives every config check uses: one wording for a bound, for a key
that nothing reads (both shared with the algorithms' own range rules,
:mod:`hpcrl.algorithms.key_rules`), for a feature that needs a feedforward actor, and
for the algorithms that offer a capability."""
from __future__ import annotations

from collections.abc import Callable

from hpcrl.algorithms import algorithms_with as named
from hpcrl.algorithms.capabilities import Capabilities
from hpcrl.algorithms.key_rules import in_unit, positive, unread
from hpcrl.sections.schema import Config

__all__ = ["algorithms_with", "in_unit", "positive", "recomputed_from_observations", "unread"]


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
