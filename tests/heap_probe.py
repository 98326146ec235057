"""A test helper: what the Python heap of a role holds at two points of a long run.

:class:`HeapProbe` wraps a method that a role calls once per update (a collector's
``collect``, a gradient worker's ``gradients``, a placement's ``run_update``) and takes a
census of the heap when its ``first``-th and ``last``-th calls start: the number of objects
the garbage collector tracks, and the number of items their lists, dicts, sets and deques
hold. Whatever a run keeps per update or per message (a list of figures, a request per
send, a dict keyed by version) raises one or the other with every update.

Why not ``tracemalloc`` bytes: numpy and torch keep bounded caches of small blocks (numpy's
shape cache, torch's pools behind ``torch.save`` and tensor unpickling) that fill over
thousands of operations, tens of kB that look like growth over a few hundred updates and
then stop. They hold no Python objects, so the census does not see them. Nor does it
count weak references and builtin methods: the ``abc`` caches add one of each per abstract
class and new type an ``isinstance`` meets (bounded by the program's types, not the run).
"""
from __future__ import annotations

import collections
import functools
import gc
import warnings
import weakref
from dataclasses import dataclass, field
from types import BuiltinMethodType
from typing import Any

CONTAINERS = (list, dict, set, collections.deque)
ABC_CACHE_TYPES = (weakref.ReferenceType, BuiltinMethodType)


@dataclass
class Census:
    """Objects tracked by the garbage collector, items in containers, objects per type."""

    objects: int
    items: int
    types: collections.Counter = field(repr=False)

    @classmethod
    def take(cls) -> Census:
        """A census after a full collection; the censuses' own objects are not counted."""
        gc.collect()
        with warnings.catch_warnings():  # a warning would fill linecache: items of its own
            warnings.simplefilter("ignore")  # (isinstance on torch's deprecated aliases)
            return cls._count()

    @classmethod
    def _count(cls) -> Census:
        own = ({id(_TAKEN)} | {id(census) for census in _TAKEN}
               | {id(census.types) for census in _TAKEN})
        objects = [o for o in gc.get_objects()
                   if id(o) not in own and type(o) not in ABC_CACHE_TYPES]
        items = sum(len(o) for o in objects if isinstance(o, CONTAINERS))
        types = collections.Counter(type(o).__qualname__ for o in objects)
        census = cls(len(objects), items, types)
        _TAKEN.append(census)
        return census


_TAKEN: list[Census] = []  # every census of the process (not counted by the next ones)


@dataclass
class HeapFigures:
    """The censuses at the two call counts."""

    calls: int = 0
    first: Census | None = None
    last: Census | None = None

    def growth(self) -> tuple[int, int]:
        """(objects, container items) the heap gained between the two censuses."""
        if self.first is None or self.last is None:
            raise AssertionError(f"the probed method ran {self.calls} times, too few for both "
                                 f"censuses")
        return self.last.objects - self.first.objects, self.last.items - self.first.items

    def grown_types(self, top: int = 6) -> str:
        """The types whose object count grew most (for a failure message)."""
        assert self.first is not None and self.last is not None
        diff = self.last.types.copy()
        diff.subtract(self.first.types)
        return ", ".join(f"{name} {n:+}" for name, n in diff.most_common(top) if n > 0)


class HeapProbe:
    """A census of the heap when ``owner.method`` starts its ``first``-th and ``last``-th
    call (``owner``: an instance, or a class in a process of its own)."""

    def __init__(self, owner: Any, method: str, first: int, last: int) -> None:
        assert 0 < first < last
        self.first, self.last = first, last
        self.figures = HeapFigures()
        original = getattr(owner, method)

        @functools.wraps(original)
        def probed(*args: Any, **kwargs: Any) -> Any:
            self._count()
            return original(*args, **kwargs)

        setattr(owner, method, probed)

    def _count(self) -> None:
        self.figures.calls += 1
        if self.figures.calls == self.first:
            self.figures.first = Census.take()
        elif self.figures.calls == self.last:
            self.figures.last = Census.take()
