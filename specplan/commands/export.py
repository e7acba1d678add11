"""`specplan export`: the launch line (and environment) that runs a spec on an engine; a
deployment: one launch per instance."""

from __future__ import annotations

from typing import TYPE_CHECKING

from specplan.commands.fit import echo
from specplan.commands.load import load_spec_arg
from specplan.errors import EXIT_BAD_INPUT, EXIT_FOUND_PROBLEM

if TYPE_CHECKING:
    from specplan.commands.target import Target
    from specplan.ecosystem.nodes import NodeOptions


def exported(target: Target, engine: str | None = None, version: str | None = None,
             nodes: NodeOptions | None = None) -> str:
    """Export for the CLI and the API alike: the launch script, after the options' refusals.
    An engine that cannot run the target raises ecosystem.translate.Refusal (exit 3); `nodes`
    the target's nodes cannot take, ecosystem.nodes.NodeRefusal (exit 2)."""
    target.refuse_export(engine, version)
    return target.export(engine, version, nodes) if nodes else target.export(engine, version)


def run(spec: str, engine: str | None, version: str | None, nodes: NodeOptions | None = None) -> int:
    """`nodes`: NodeOptions (ecosystem/nodes.py) for one line per node; None: one line."""
    from specplan.ecosystem.nodes import NodeRefusal
    from specplan.ecosystem.translate import Refusal

    target = load_spec_arg(spec)
    try:
        text = exported(target, engine, version, nodes)
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
