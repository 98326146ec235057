"""Named-field records: one flat buffer whose fields are typed numpy views.

Every fixed-size message between roles (the gradient info, the weights' control part, the
per-update report, the normaliser moments, the header of a rollout or a transition chunk)
is declared as a list of ``(name, shape, dtype)`` fields, placed in one buffer by
:func:`field_slices` (the mechanism the step fields of rollouts and transition chunks use
too, :func:`attach_views`). The record crosses processes as its one flat ``data`` buffer
(float32 words, no pickling); code reads and writes fields by name, so adding a field
touches no offset anywhere.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Generic, TypeVar, cast, overload

import numpy as np

Field = tuple  # (name, shape) or (name, shape, dtype); float32 when no dtype is given


def _field_parts(field: Field) -> tuple[str, tuple[int, ...], np.dtype]:
    name, shape = field[0], field[1]
    return name, shape, np.dtype(field[2] if len(field) > 2 else np.float32)


FieldSlice = tuple  # (name, first byte, end byte, dtype, shape) of one field in a buffer


def field_slices(fields: Iterator[Field]) -> tuple[FieldSlice, ...]:
    """Where each field lies in a buffer that holds ``fields`` back to back, each aligned to
    its item size (so a layout of float32 fields takes exactly their element count)."""
    slices, offset = [], 0
    for field in fields:
        name, shape, dtype = _field_parts(field)
        offset = -(-offset // dtype.itemsize) * dtype.itemsize
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        slices.append((name, offset, offset + nbytes, dtype, tuple(shape)))
        offset += nbytes
    return tuple(slices)


def slices_words(slices: tuple[FieldSlice, ...]) -> int:
    """float32 words of a buffer that holds the fields placed by :func:`field_slices`."""
    return -(-slices[-1][2] // 4) if slices else 0


def buffer_words(fields: Iterator[Field]) -> int:
    """float32 words of a buffer that holds ``fields`` (see :func:`field_slices`)."""
    return slices_words(field_slices(fields))


def attach_slices(owner: object, slices: tuple[FieldSlice, ...], data: np.ndarray) -> None:
    """Set ``owner.<name>`` to the view of ``data`` each slice of :func:`field_slices` says,
    shaped and typed as its field. ``data`` is a float32 buffer; a field of another dtype
    (integer observations, say) is a view of its bytes, so the whole message still crosses
    processes as one buffer."""
    raw = data.view(np.uint8)
    for name, first, end, dtype, shape in slices:
        setattr(owner, name, raw[first:end].view(dtype).reshape(shape))


def attach_views(owner: object, fields: Iterator[Field], data: np.ndarray) -> None:
    """:func:`attach_slices` for ``fields`` laid out by :func:`field_slices` (``data`` a
    float32 buffer of :func:`buffer_words` words)."""
    attach_slices(owner, field_slices(fields), data)


R = TypeVar("R", bound="Record")


class RecordLayout(Generic[R]):
    """An ordered list of fields; equal layouts give interchangeable buffers.

    A field is ``(name, shape)`` (float32), ``(name, shape, dtype)``, or ``(name, layout)``:
    a nested record of another layout (its record is built with that layout's
    ``record_type``). ``record_type`` is the :class:`Record` subclass :meth:`new` and
    :meth:`wrap` build. The layout is generic in it (``RecordLayout[GradientInfo]``), so the
    type checker knows the fields of the records a layout makes: a subclass declares them
    as class-level annotations.
    """

    @overload
    def __init__(self: RecordLayout[Record],
                 fields: Iterable[Field | tuple[str, RecordLayout[Any]]],
                 record_type: None = None) -> None: ...

    @overload
    def __init__(self, fields: Iterable[Field | tuple[str, RecordLayout[Any]]],
                 record_type: type[R]) -> None: ...

    def __init__(self, fields: Iterable[Field | tuple[str, RecordLayout[Any]]],
                 record_type: type[R] | None = None) -> None:
        flat: list[Field] = []
        self.parts: dict[str, RecordLayout[Any]] = {}
        for field in fields:
            if isinstance(field[1], RecordLayout):  # a nested record, 8-byte aligned
                self.parts[field[0]] = field[1]
                flat.append((field[0], (field[1].words // 2,), np.float64))
            else:
                flat.append(field)
        self.fields: tuple[Field, ...] = tuple(flat)
        # no record_type: plain Record, which the first overload types as R
        self.record_type: type[R] = cast("type[R]", record_type or Record)
        names = [f[0] for f in self.fields]
        if len(set(names)) != len(names):
            raise ValueError(f"a record layout repeats a field name: {names}")
        self.names = tuple(names)
        self.slices = field_slices(iter(self.fields))  # where each field lies, made once
        words = slices_words(self.slices)
        # float32 words of the buffer, even, so that records stacked as the rows of one
        # matrix (a gathered report, say) keep their 8-byte fields aligned; computed once
        # (a layout never changes, and records are made every update)
        self.words: int = words + words % 2

    def new(self) -> R:
        """A record of zeros in a buffer of its own."""
        return self.record_type(self, np.zeros(self.words, np.float32))

    def wrap(self, data: np.ndarray) -> R:
        """The record whose buffer is ``data`` (a received row, a slice of a bigger one)."""
        return self.record_type(self, data)

    def rows(self, matrix: np.ndarray) -> list[R]:
        """One record per row of ``matrix`` (each row a buffer of this layout)."""
        return [self.wrap(row) for row in matrix]


class Record:
    """The fields of a :class:`RecordLayout` as attributes, views of ``data``.

    A subclass that code reads by attribute declares its layout's fields as class-level
    annotations (``version: np.ndarray``; a nested record as its record type), so the type
    checker sees them; the values are still set here, from the layout.
    """

    def __init__(self, layout: RecordLayout[Any], data: np.ndarray) -> None:
        if data.dtype != np.float32 or data.size != layout.words or data.ndim != 1:
            raise ValueError(f"a record of this layout needs a 1-d float32 buffer of "
                             f"{layout.words} words, got {data.dtype} {data.shape}")
        self.layout, self.data = layout, data
        attach_slices(self, layout.slices, data)
        for name, part in layout.parts.items():
            setattr(self, name, part.wrap(getattr(self, name).view(np.float32)))

    def __getitem__(self, key: Any) -> Any:
        """A field by name; any other key indexes the flat buffer (``record[None, :]`` is
        the record as a one-row matrix, as gathered records arrive)."""
        return getattr(self, key) if isinstance(key, str) else self.data[key]

    def __setitem__(self, name: str, value: Any) -> None:
        self.set(**{name: value})

    def set(self: R, **values: Any) -> R:
        """Write fields by name (a scalar field takes a number)."""
        for name, value in values.items():
            if name not in self.layout.names:
                raise KeyError(f"no field {name!r} in this record ({', '.join(self.layout.names)})")
            getattr(self, name)[...] = value
        return self

    def value(self, name: str) -> float:
        """A scalar field as a Python number."""
        return getattr(self, name).item()

    def copy_from(self: R, other: Record) -> R:
        """Copy ``other``'s values (a record of the same layout) into this one; returns it."""
        self.data[:] = other.data
        return self


def scalar_fields(names: Sequence[str], dtype: Any = np.float64) -> list[Field]:
    """One scalar field per name, all of ``dtype``."""
    return [(name, (), dtype) for name in names]
