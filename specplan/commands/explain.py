"""`specplan explain`: tables, one rank's view, JSON or a picture of a spec or a deployment."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Callable

import click

from specplan.commands.common import console, dump_json
from specplan.commands.fit import echo
from specplan.commands.load import load_spec_arg

if TYPE_CHECKING:
    from specplan.commands.target import Target


def explained(target: Target, *, rank: int | None = None, lazy: bool = False) -> dict[str, Any]:
    """Explain for the API (and the CLI's --json --rank): the `explain --json` object, or with
    `rank` that rank's view, after the options' refusals."""
    from specplan.views.explain import rank_data

    target.refuse_explain(rank=rank, picture=None)
    data = target.explain_data(lazy=lazy)
    return data if rank is None else rank_data(data, rank)


def pictured(target: Target, kind: str, fmt: str = "svg", family: str | None = None,
             out: str | None = None, *, where: str | None = None) -> str | None:
    """explain --picture for the CLI and the API alike: the path written (None: stdout); a
    PNG asked for without a renderer installed is bad input (exit 2) naming `where` (default:
    the target's file)."""
    target.refuse_explain(rank=None, picture=kind)
    return _drawn(where or target.where, lambda: target.picture(kind, fmt, family, out))


def run(spec: str, *, rank: int | None, as_json: bool, picture: str | None, fmt: str,
        family: str | None, out: str | None, all_families: bool) -> int:
    """Explain SPEC; returns the exit code. A picture goes to `out`, or to stdout without it."""
    if fmt == "png" and out is None and sys.stdout.isatty():
        raise click.UsageError("--format png is binary: write it with -o FILE or redirect stdout")
    target = load_spec_arg(spec)  # bad input fails here, before the planner is even imported
    target.refuse_explain(rank=rank, picture=picture)
    if picture:
        written = pictured(target, picture, fmt, family, out, where=spec)
        if written:
            echo(written)
        return 0
    if as_json and rank is not None:
        dump_json(explained(target, rank=rank, lazy=True))
        return 0
    target.print_explain(target.explain_data(), as_json=as_json, rank=rank,
                         all_families=all_families, console=None if as_json else console())
    return 0


def _drawn(where: str, draw: Callable[[], str | None]) -> str | None:
    from specplan.errors import Diagnostic, SpecError
    from specplan.pictures import NoRenderer

    try:
        return draw()
    except NoRenderer as exc:
        raise SpecError([Diagnostic(where, None, None, "", str(exc))]) from None
