"""Plain-text tables that fit a terminal: what ``hpcrl runs`` prints.

A table is a header and rows of cells, left-aligned in columns two spaces apart. To fit a
width, :func:`fit` leaves out the columns it may drop, in the order given, and then cuts the
cells of one column in the middle (``runs/ppo-...-101500``), so no line is longer than the
width and what is left out can be named to the reader.
"""
from __future__ import annotations

from collections.abc import Sequence

GAP = "  "
ELLIPSIS = "..."  # ASCII: a login node's locale may be C


def render(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """The table's lines, each column as wide as its widest cell, trailing blanks cut."""
    widths = [max(len(c) for c in col) for col in zip(header, *rows, strict=True)]
    return [GAP.join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
            for row in [header, *rows]]


def table_width(header: Sequence[str], rows: Sequence[Sequence[str]]) -> int:
    """The length of the table's longest line."""
    return max(len(line) for line in render(header, rows))


def cut_middle(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters by an ellipsis in its middle, so both its start
    and its end (a run directory's time stamp) stay readable."""
    if len(text) <= width:
        return text
    if width <= len(ELLIPSIS):
        return text[:width]
    head = (width - len(ELLIPSIS)) // 2
    tail = width - len(ELLIPSIS) - head
    return text[:head] + ELLIPSIS + (text[-tail:] if tail else "")


def fit(header: list[str], rows: list[list[str]], width: int, drop: Sequence[int],
        shrink: int, min_shrink: int, then_drop: Sequence[int] = ()
        ) -> tuple[list[str], list[int]]:
    """The lines of the table cut to ``width``, and the columns left out.

    While a line is too long, the next column of ``drop`` is left out; if that is not enough,
    the cells of column ``shrink`` are cut in the middle, down to ``min_shrink`` characters,
    and the columns of ``then_drop`` are left out one by one; a line still too long after all
    that (a very narrow terminal) is cut at ``width``."""
    left_out: list[int] = []
    for column in drop:
        if table_width(*_without(header, rows, left_out)) <= width:
            break
        left_out.append(column)
    for column in then_drop:
        if table_width(*_shrunk(header, rows, left_out, shrink, width, min_shrink)) <= width:
            break
        left_out.append(column)
    head, body = _shrunk(header, rows, left_out, shrink, width, min_shrink)
    return [line[:width] for line in render(head, body)], left_out


def _shrunk(header: list[str], rows: list[list[str]], left_out: Sequence[int], shrink: int,
            width: int, min_shrink: int) -> tuple[list[str], list[list[str]]]:
    """The table less the ``left_out`` columns, column ``shrink`` cut (no shorter than
    ``min_shrink``) so the table is as near ``width`` as that allows."""
    head, body = _without(header, rows, left_out)
    excess = table_width(head, body) - width
    if excess <= 0 or shrink in left_out:
        return head, body
    at = shrink - sum(c < shrink for c in left_out)
    longest = max(len(c) for c in [head[at], *(r[at] for r in body)])
    keep = max(longest - excess, min_shrink)
    cut = [[*r[:at], cut_middle(r[at], keep), *r[at + 1:]] for r in [head, *body]]
    return cut[0], cut[1:]


def _without(header: list[str], rows: list[list[str]], columns: Sequence[int]
             ) -> tuple[list[str], list[list[str]]]:
    keep = [i for i in range(len(header)) if i not in columns]
    return [header[i] for i in keep], [[r[i] for i in keep] for r in rows]
