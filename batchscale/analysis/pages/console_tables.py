"""A plain-text table that fits a terminal's width.

A table wider than the terminal wraps each row onto two or three lines and nobody can read
its columns any more; the study's tables (steps to result: eleven columns, about 155
characters) are wider than the 80 columns a terminal opens with. ``fit_table`` keeps a
table that fits as it always was (one header line, cells right-aligned, two spaces apart)
and otherwise, in this order:

1. stacks each header's words (split at ``_``) onto lines as narrow as its cells
   (``steps_to_result`` over ``steps`` / ``to`` / ``result``), bottom-aligned;
2. leaves out columns with no value at all, then those named in ``leave_out_first`` in
   that order, then others from the right end (never the first, which names the rows),
   until the lines fit;
3. says below the table which columns it left out (an empty one marked so), and how to
   see them (``more``), wrapped to the width too.

Values are never cut or wrapped: a number split over two lines is worse than a column
left out and named.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

GAP = "  "


def fit_table(columns: Sequence[str], rows: Sequence[Sequence[str]], width: int | None = None,
              leave_out_first: Sequence[str] = (), more: str = "") -> list[str]:
    """The table's lines, each at most ``width`` characters where it can be (None: no limit,
    the one-line header as is). ``rows`` hold the cells as text, in ``columns`` order."""
    columns = [str(c) for c in columns]
    full = _layout(columns, rows, range(len(columns)), stacked=False)
    if width is None or _widest(full) <= width:
        return full
    shown = list(range(len(columns)))
    for i in _leave_out_order(columns, rows, leave_out_first):
        lines = _layout(columns, rows, shown, stacked=True)
        if _widest(lines) <= width:
            break
        shown.remove(i)
    lines = _layout(columns, rows, shown, stacked=True)
    left_out = [columns[i] + (" (empty)" if not any(str(r[i]).strip() for r in rows) else "")
                for i in range(len(columns)) if i not in shown]
    if left_out:
        lines += textwrap.wrap(f"(not shown, to fit {width} columns: {', '.join(left_out)}{more})",
                               width, break_on_hyphens=False)
    return lines


def _leave_out_order(columns, rows, first: Sequence[str]) -> list[int]:
    """Which columns go, in order: those without a value, ``first``, then right to left;
    never column 0."""
    empty = [i for i in range(1, len(columns)) if not any(str(r[i]).strip() for r in rows)]
    named = [columns.index(c) for c in first if c in columns and columns.index(c) > 0]
    rest = list(range(len(columns) - 1, 0, -1))
    return list(dict.fromkeys([*empty, *named, *rest]))


def _layout(columns, rows, shown, stacked: bool) -> list[str]:
    cells = {i: [str(r[i]) for r in rows] for i in shown}
    heads = {i: _stack(columns[i], max((len(v) for v in cells[i]), default=0)) if stacked
             else [columns[i]] for i in shown}
    widths = {i: max([*(len(v) for v in cells[i]), *(len(w) for w in heads[i])]) for i in shown}
    depth = max((len(heads[i]) for i in shown), default=1)
    header = [[""] * (depth - len(heads[i])) + heads[i] for i in shown]  # bottom-aligned
    lines = [GAP.join(h[k].rjust(widths[i]) for h, i in zip(header, shown)).rstrip() for k in range(depth)]
    lines += [GAP.join(cells[i][r].rjust(widths[i]) for i in shown) for r in range(len(rows))]
    return lines


def _stack(name: str, cell_width: int) -> list[str]:
    """``name``'s words (split at ``_``) on as few lines as fit the wider of its cells and
    its longest word, joined back with ``_`` where two share a line."""
    words = name.split("_")
    room = max(cell_width, *(len(w) for w in words))
    lines = [words[0]]
    for word in words[1:]:
        if len(lines[-1]) + 1 + len(word) <= room:
            lines[-1] += "_" + word
        else:
            lines.append(word)
    return lines


def _widest(lines: list[str]) -> int:
    return max((len(line) for line in lines), default=0)
