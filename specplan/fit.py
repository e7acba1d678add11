"""Output that fits the width it is given (issue 38): the console every command prints through.

The width is COLUMNS when set, else the terminal's, else (piped) 100 (verify/formats.py
`terminal_width`). A table whose narrowest layout (each cell at its longest word) fits is printed
as a table, its cells wrapped between words; one that does not is printed vertically, one
paragraph of `header: value` pairs per row, so no identifier is ever cut or ended with an
ellipsis.
"""

from __future__ import annotations

import sys
import textwrap

from rich.console import Console, Group
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text


class FittingConsole(Console):
    """A rich Console whose tables fit its width (or turn vertical) instead of cutting cells."""

    def print(self, *objects, **kwargs) -> None:  # type: ignore[override]
        kwargs.pop("soft_wrap", None)  # a soft-wrapped line would run past the width
        super().print(*(fitted(self, o) for o in objects), **kwargs)


def fitted(console: Console, renderable):
    """`renderable`, or a table too wide for `console` as its vertical layout."""
    if not isinstance(renderable, Table):
        return renderable
    for column in renderable.columns:
        column.overflow = "fold"  # wraps between words; the width check below keeps words whole
    unbounded = console.options.update(max_width=1 << 20)  # Measurement clamps to max_width
    narrowest = Measurement.get(console, unbounded, renderable).minimum
    return renderable if narrowest <= console.width else vertical(renderable, console.width)


def vertical(table: Table, width: int) -> Group:
    """The table as one paragraph per row (`header: value; header: value ...`, the first
    cell leading), wrapped between words at `width`."""
    headers = [_plain(c.header) or f"column {i}" for i, c in enumerate(table.columns)]
    rows = list(zip(*(list(c.cells) for c in table.columns)))
    lines = [Text(x) for x in _wrap(_plain(table.title), width)] if table.title else []
    for row in rows:
        cells = [f"{h}: {_plain(c)}" for h, c in zip(headers, row) if _plain(c).strip()]
        lines.extend(Text(x) for x in _wrap("- " + "; ".join(cells), width))
    return Group(*lines)


def _plain(cell) -> str:
    return cell.plain if isinstance(cell, Text) else str(cell or "")


def _wrap(text: str, width: int) -> list[str]:
    out: list[str] = []
    for part in text.splitlines() or [""]:
        out += textwrap.wrap(part, width=max(width, 20), subsequent_indent="    ",
                             break_long_words=False, break_on_hyphens=False) or [""]
    return out


def console() -> FittingConsole:
    """The console of every command: the width it is given (COLUMNS, the terminal's, or 100
    piped). markup=False: names, findings and rank errors are untrusted text ("[/...pair.cc:553]"
    is not a tag); printers style with rich.text.Text, never with markup strings."""
    from specplan.verify.formats import terminal_width

    tty = sys.stdout.isatty()
    return FittingConsole(highlight=False, markup=False, width=terminal_width(), no_color=not tty,
                          force_terminal=tty)
