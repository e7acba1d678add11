"""Output that fits the width it is given (issue 38): the console every command prints through.

The width is COLUMNS when set, else the terminal's, else (piped) 100 (verify/formats.py
`terminal_width`). A table whose narrowest layout (each cell at its longest word) fits is printed
as a table, its cells wrapped between words; one that does not is printed vertically, one
paragraph of `header: value` pairs per row, so no identifier is ever cut or ended with an
ellipsis.
"""

from __future__ import annotations

import re
import sys
import textwrap
from typing import Any

from rich.console import Console, Group
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text


class FittingConsole(Console):
    """A rich Console whose tables fit its width (or turn vertical) instead of cutting cells."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        kwargs.pop("soft_wrap", None)  # a soft-wrapped line would run past the width
        super().print(*(fitted(self, o) for o in objects), **kwargs)


def fitted(console: Console, renderable: Any) -> Any:
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


def _plain(cell: object) -> str:
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


def fit_text(text: str, width: int | None = None) -> str:
    """Plain lines (reports, YAML comments, bash scripts) fitted to `width` (default: the
    terminal's) without changing what they mean: a `#` comment wraps into more `#` lines at its
    indent; a code line's trailing `  # comment` moves onto comment lines above it; a command
    longer than the width continues with ` \\` between its words (never inside quotes); other
    prose wraps between words. A word longer than the width stays whole."""
    from specplan.verify.formats import terminal_width

    width = width or terminal_width()
    out: list[str] = []
    for line in text.split("\n"):
        out += [line] if len(line) <= width else _fit_line(line, width)
    return "\n".join(out)


def _fit_line(line: str, width: int) -> list[str]:
    indent = line[: len(line) - len(line.lstrip())]
    body = line.strip()
    if body.startswith("#"):
        return _comment(body.lstrip("#").strip(), indent, width)
    code, sep, comment = _split_comment(body)
    if sep:
        return _comment(comment, indent, width) + _fit_line(indent + code, width)
    if _is_shell(body):
        return _continued(body, indent, width)
    return textwrap.wrap(line, width=max(width, 20), subsequent_indent=indent + "  ",
                         break_long_words=False, break_on_hyphens=False) or [line]


def _comment(text: str, indent: str, width: int) -> list[str]:
    return textwrap.wrap(text, width=max(width, 20), initial_indent=indent + "# ",
                         subsequent_indent=indent + "#   ", break_long_words=False,
                         break_on_hyphens=False) or [indent + "#"]


def _words(body: str) -> list[str]:
    """`body` split at the spaces outside quotes, each word as written."""
    words: list[str] = []
    word, quote = "", ""
    for ch in body:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == " ":
            words, word = words + [word] if word else words, ""
            continue
        word += ch
    return words + [word] if word else words


def _split_comment(body: str) -> tuple[str, str, str]:
    """`code  # comment` (two spaces, outside quotes) as (code, "#", comment)."""
    words = _words(body)
    if "#" not in words:
        return body, "", ""
    at = body.find("  # ")
    return (body[:at].rstrip(), "#", body[at + 4:]) if at > 0 else (body, "", "")


def _is_shell(body: str) -> bool:
    return bool(body) and (body.startswith(("python", "vllm", "export ", "SPECPLAN_", "torchrun", "ray "))
                           or "=" in body.split(" ")[0] or body.startswith("--"))


def _continued(body: str, indent: str, width: int) -> list[str]:
    lines, current = [], indent
    for word in _words(body):
        if current.strip() and len(current) + 1 + len(word) + 2 > width:
            lines.append(current + " \\")
            current = indent + "  " + word
        else:
            current = f"{current} {word}" if current.strip() else current + word
    return lines + [current]


def fit_yaml(text: str, width: int | None = None) -> str:
    """A spec's YAML fitted to `width`: a long double-quoted scalar is folded with YAML's
    escaped line break (a `\\` at the end of the line: the text reads back unchanged); a long
    comment wraps into more comment lines. Other lines are kept as they are."""
    from specplan.verify.formats import terminal_width

    width = width or terminal_width()
    out: list[str] = []
    for line in text.split("\n"):
        body = line.lstrip()
        indent = line[: len(line) - len(body)]
        at = line.find(' "')
        if len(line) <= width:
            out.append(line)
        elif body.startswith("#"):
            out += _comment(body.lstrip("#").strip(), indent, width)
        elif at > 0 and line.endswith('"'):
            out += _folded(line[: at + 1], line[at + 1:], indent + "  ", width)
        else:
            out.append(line)
    return "\n".join(out)


def _folded(head: str, quoted: str, indent: str, width: int) -> list[str]:
    """`head "quoted..."` broken after spaces of the quoted text, each piece but the last
    ending in `\\` (YAML keeps the space before it and drops the break and the indent)."""
    lines, current = [], head
    for piece in re.split(r"(?<= )", quoted):
        if current.strip() and len(current) + len(piece) + 1 > width and not current.endswith("\\"):
            lines.append(current + "\\")
            current = indent + piece
        else:
            current += piece
    return lines + [current]


def echo(text: str, *, err: bool = False, nl: bool = True) -> None:
    """click.echo of `text` fitted to the width (fit_text)."""
    import click

    click.echo(fit_text(text), err=err, nl=nl)


def echo_yaml(text: str) -> None:
    """A spec's YAML on stdout, fitted to the width (fit_yaml)."""
    import click

    click.echo(fit_yaml(text), nl=False)
