"""`specplan explain`: tables, one rank's view, JSON or a picture of a spec or a deployment."""

from __future__ import annotations

import sys

import click

from specplan.commands.common import console
from specplan.commands.fit import echo
from specplan.commands.load import load_spec_arg


def run(spec: str, *, rank: int | None, as_json: bool, picture: str | None, fmt: str,
        family: str | None, out: str | None, all_families: bool) -> int:
    """Explain SPEC; returns the exit code. A picture goes to `out`, or to stdout without it."""
    if fmt == "png" and out is None and sys.stdout.isatty():
        raise click.UsageError("--format png is binary: write it with -o FILE or redirect stdout")
    target = load_spec_arg(spec)  # bad input fails here, before the planner is even imported
    target.refuse_explain(rank=rank, picture=picture)
    if picture:
        written = _pictured(spec, lambda: target.picture(picture, fmt, family, out))
        if written:
            echo(written)
        return 0
    target.print_explain(target.explain_data(), as_json=as_json, rank=rank,
                         all_families=all_families, console=None if as_json else console())
    return 0


def _pictured(spec: str, draw):
    """Run `draw`; a PNG asked for without a renderer installed is bad input (exit 2)."""
    from specplan.errors import Diagnostic, SpecError
    from specplan.pictures import NoRenderer

    try:
        return draw()
    except NoRenderer as exc:
        raise SpecError([Diagnostic(spec, None, None, "", str(exc))]) from None
