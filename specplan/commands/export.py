"""`specplan export`: the launch line (and environment) that runs a spec on an engine; a
deployment: one launch per instance."""

from __future__ import annotations

import click

from specplan.commands.common import EXIT_FOUND_PROBLEM, load_spec_arg


def run(spec: str, engine: str | None, version: str | None) -> int:
    from specplan.commands import deployment
    from specplan.deploy import InstancePair
    from specplan.ecosystem.export import export, render
    from specplan.ecosystem.translate import Refusal

    loaded = load_spec_arg(spec)
    if isinstance(loaded, InstancePair) and (engine or version):
        raise click.UsageError("--engine and --engine-version apply to one spec; a deployment "
                               "exports each instance on its own engine and release")
    if version:
        check_release(engine or loaded.engine, version)
    try:
        text = deployment.export(loaded) if isinstance(loaded, InstancePair) else render(export(loaded, engine, version))
    except Refusal as exc:
        click.echo(f"specplan export: {exc}", err=True)
        return EXIT_FOUND_PROBLEM
    click.echo(text, nl=False)
    return 0


def check_release(engine: str, version: str | None) -> None:
    """--engine-version outside the engine's table: a usage error (exit 2) listing them."""
    from specplan.engines.releases import UnknownRelease, check

    try:
        check(engine, version)
    except UnknownRelease as exc:
        raise click.BadParameter(str(exc), param_hint="'--engine-version'") from None
