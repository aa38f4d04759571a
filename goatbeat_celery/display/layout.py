"""Layout for terminals: aligned tables fitted to a width (columns left out, then cut short
with an ellipsis) and ``label  value`` lines; every cell passes through :func:`shown`."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Union

from goatbeat_celery.display.escaping import shown
from goatbeat_celery.display.scalars import NONE

#: A value in :func:`fields`: one line, or several (each shown on its own line).
Value = Union[str, tuple[str, ...]]


#: How wide ``list`` and ``history`` are when standard output is no terminal and ``COLUMNS`` is
#: not set (a pipe, a file): wide enough for their main columns; ``--wide`` and ``--json`` give
#: scripts every value whole.
DEFAULT_WIDTH = 100
#: The narrowest a column is cut to, even when the line then exceeds the width.
CLIPPED_MIN = 10
#: What the cut columns keep before a column that may be left out is (unless told otherwise).
ROOMY = 24
ELLIPSIS = "\u2026"


def _terminal_columns() -> int | None:
    """The width of the terminal standard output is, or None when it is none (a pipe, a file)."""
    try:
        if sys.stdout.isatty():
            return os.get_terminal_size(sys.stdout.fileno()).columns
    except (OSError, ValueError, AttributeError):  # a stream without a file descriptor
        pass
    return None


def terminal_width() -> int:
    """How wide a table may be: ``COLUMNS`` when set to a positive number (as ``click`` and
    :func:`shutil.get_terminal_size` read it), else the width of the terminal standard output
    is, else :data:`DEFAULT_WIDTH`. The terminal measured is the stream written to, not
    ``sys.__stdout__``, so output sent elsewhere is not fitted to a terminal it never reaches."""
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        columns = 0
    if columns > 0:
        return columns
    return _terminal_columns() or DEFAULT_WIDTH


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, width: int | None = None,
          clipped: Mapping[str, str] | None = None, dropped: Sequence[str] = (),
          roomy: int = ROOMY) -> str:
    """Left-aligned columns two spaces apart; no trailing spaces; every cell :func:`shown`.

    With ``width``, the table is made to fit it: first the columns named in ``dropped`` are left
    out, in that order, while the line would not fit with the ``clipped`` columns cut to
    ``roomy`` characters; then the columns named in ``clipped`` are cut short with an ellipsis
    (at their ``"end"`` or in the ``"middle"``) as far as the other columns leave room: a cut
    column keeps at least :data:`CLIPPED_MIN` characters."""
    raw = [list(line) for line in (headers, *rows)]
    lines = [[shown(cell) for cell in line] for line in raw]
    if width is not None and (clipped or dropped):
        cuts = clipped or {}
        kept = _columns_kept(lines, cuts, dropped, width, roomy)
        raw = [[line[i] for i in kept] for line in raw]
        lines = [[line[i] for i in kept] for line in lines]
        names = raw[0]
        widths = _widths(lines)
        flexible = [i for i, name in enumerate(names) if name in cuts]
        limits = _fitted(widths, flexible, width)
        lines = [[_clip(cell, shown_cell, limits.get(i), cuts.get(names[i], "end"))
                  for i, (cell, shown_cell) in enumerate(zip(line, shown_line, strict=True))]
                 for line, shown_line in zip(raw, lines, strict=True)]
    widths = _widths(lines)
    return "\n".join(
        "  ".join(cell.ljust(size) for cell, size in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )


def _widths(lines: Sequence[Sequence[str]]) -> list[int]:
    return [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]


def _columns_kept(lines: Sequence[Sequence[str]], clipped: Mapping[str, str],
                  dropped: Sequence[str], width: int, roomy: int) -> list[int]:
    """The indexes of the columns shown: all but those of ``dropped`` that must go for the line
    to fit. Those holding nothing (``-`` in every row) go first, while anything is cut; then the
    others, in order, while a clipped column would be cut below ``roomy``."""
    headers, *rows = lines
    widths = _widths(lines)
    kept = list(range(len(headers)))
    present = [headers.index(name) for name in dropped if name in headers]
    empty = [i for i in present if all(row[i] == NONE for row in rows)]

    def needed(cut: int | None) -> int:
        return sum(min(widths[i], cut) if cut is not None and headers[i] in clipped
                   else widths[i] for i in kept) + 2 * (len(kept) - 1)

    for index in empty:
        if needed(None) > width:
            kept.remove(index)
    for index in present:
        if index in kept and needed(roomy) > width:
            kept.remove(index)
    return kept


def _fitted(widths: Sequence[int], flexible: Sequence[int], width: int) -> dict[int, int]:
    """How wide each flexible column may be so the line fits in ``width``: the narrow ones keep
    their width, the others share what is left equally."""
    fixed = sum(w for i, w in enumerate(widths) if i not in flexible) + 2 * (len(widths) - 1)
    room = width - fixed
    limits: dict[int, int] = {}
    order = sorted(flexible, key=lambda i: widths[i])
    for done, index in enumerate(order):
        share = room // (len(order) - done)
        limits[index] = min(widths[index], max(share, CLIPPED_MIN))
        room -= limits[index]
    return limits


def _clip(raw: str, cell: str, limit: int | None, where: str = "end") -> str:
    """``cell`` (``raw`` as :func:`shown`) cut to ``limit`` characters with an ellipsis at its
    end or in its middle; an escape is kept whole or left out, never cut."""
    if limit is None or len(cell) <= limit:
        return cell
    room = limit - len(ELLIPSIS)
    if where == "middle":
        tail = "".join(reversed(_kept(reversed(raw), room // 2)))
        return "".join(_kept(iter(raw), room - len(tail))) + ELLIPSIS + tail
    return "".join(_kept(iter(raw), room)) + ELLIPSIS


def _kept(chars: Iterator[str], room: int) -> list[str]:
    """The characters taken from ``chars``, each as :func:`shown`, while they fit in
    ``room``."""
    pieces: list[str] = []
    used = 0
    for char in chars:
        piece = shown(char)
        if used + len(piece) > room:
            break
        pieces.append(piece)
        used += len(piece)
    return pieces


def fields(pairs: Sequence[tuple[str, Value]]) -> str:
    """``label  value`` lines with the values aligned, each :func:`shown` (a newline in a value
    is escaped); a value given as a tuple is one line per item, the later ones indented."""
    width = max(len(shown(label)) for label, _ in pairs)
    lines: list[str] = []
    for label, value in pairs:
        first, *rest = [shown(line) for line in
                        ((value,) if isinstance(value, str) else value)] or [""]
        lines.append(f"{shown(label).ljust(width)}  {first}".rstrip())
        lines.extend(f"{'':{width}}  {line}".rstrip() for line in rest)
    return "\n".join(lines)
