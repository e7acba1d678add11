"""`specplan explain`: tables, one rank's view, JSON or a picture of a spec or a deployment."""

from __future__ import annotations

import sys

import click

from specplan.commands.common import console, dump_json, load_spec_arg


def run(spec: str, *, rank: int | None, as_json: bool, picture: str | None, fmt: str,
        family: str | None, out: str | None, all_families: bool) -> int:
    """Explain SPEC; returns the exit code. A picture goes to `out`, or to stdout without it."""
    from specplan.deploy import InstancePair
    from specplan.errors import Diagnostic, SpecError

    if fmt == "png" and out is None and sys.stdout.isatty():
        raise click.UsageError("--format png is binary: write it with -o FILE or redirect stdout")
    loaded = load_spec_arg(spec)  # bad input fails here, before the planner is even imported
    if isinstance(loaded, InstancePair):
        from specplan.commands import deployment

        if rank is not None:
            raise click.UsageError("--rank shows one rank of a spec; explain an instance's spec")
        return _pictured(spec, lambda: deployment.explain(loaded, as_json, console(), picture, fmt, out))
    if picture == "kv":
        raise SpecError([Diagnostic(spec, None, None, "", "--picture kv draws a deployment's KV "
                                    "handoff; this spec has no peer (see disaggregation)")])
    from specplan.explain import explain_data, rank_data, render
    from specplan.lower import build_plan
    from specplan.passes import plan as run_passes
    from specplan.round_view import render_round, round_data

    planning = run_passes(loaded)
    mesh = planning.mesh
    if rank is not None and not 0 <= rank < mesh.world_size:
        raise SpecError([Diagnostic(spec, None, None, "", f"--rank {rank} is outside the world: "
                                    f"expected 0 .. {mesh.world_size - 1}")])
    data = explain_data(loaded, mesh, lazy=not picture)  # pictures read plain lists
    data["round"] = round_data(built := build_plan(planning), lazy=not picture)
    if picture:
        from specplan.pictures import write_picture

        written = _pictured(spec, lambda: write_picture(spec, picture, fmt, data, planning, built,
                                                        family, out))
        if written:
            click.echo(written)
        return 0
    if as_json and rank is not None:
        dump_json(rank_data(data, rank))
        return 0
    if as_json:  # rows are written as they are made: 1M ranks never sit in memory at once
        from specplan.explain_stream import write_json

        write_json(data, sys.stdout.write)
        sys.stdout.write("\n")
        return 0
    con = console()
    render(data, con, rank, all_families)
    if rank is None:
        render_round(data["round"], con)
    return 0


def _pictured(spec: str, draw):
    """Run `draw`; a PNG asked for without a renderer installed is bad input (exit 2)."""
    from specplan.errors import Diagnostic, SpecError
    from specplan.pictures import NoRenderer

    try:
        return draw()
    except NoRenderer as exc:
        raise SpecError([Diagnostic(spec, None, None, "", str(exc))]) from None
