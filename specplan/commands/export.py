"""`specplan export`: the launch line (and environment) that runs a spec on an engine; a
deployment: one launch per instance."""

from __future__ import annotations

from specplan.commands.common import EXIT_BAD_INPUT, EXIT_FOUND_PROBLEM
from specplan.commands.fit import echo
from specplan.commands.load import load_spec_arg


def run(spec: str, engine: str | None, version: str | None, nodes=None) -> int:
    """`nodes`: NodeOptions (ecosystem/nodes.py) for one line per node; None: one line."""
    from specplan.ecosystem.nodes import NodeRefusal
    from specplan.ecosystem.translate import Refusal

    target = load_spec_arg(spec)
    target.refuse_export(engine, version)
    try:
        text = target.export(engine, version, nodes) if nodes else target.export(engine, version)
    except Refusal as exc:
        echo(f"specplan export: {exc}", err=True)
        return EXIT_FOUND_PROBLEM
    except NodeRefusal as exc:
        echo(f"specplan export: {spec}: {exc}", err=True)
        return EXIT_BAD_INPUT
    if nodes is not None and _piped():  # one physical line per node for the program reading it
        import click

        click.echo(text, nl=False)
    else:
        echo(text, nl=False)
    return 0


def _piped() -> bool:
    """stdout is no terminal and no width was asked for (COLUMNS)."""
    import os
    import sys

    return not sys.stdout.isatty() and not os.environ.get("COLUMNS", "").isdigit()
