"""`specplan check`: a spec, a deployment, a plan.json or two instance specs, proved or listed."""

from __future__ import annotations

import click

from specplan.commands.common import EXIT_FOUND_PROBLEM


def run(targets: tuple[str, ...], *, as_json: bool, fmt: str, severity: str, verbose: bool) -> int:
    from specplan.commands.load import load_checked

    if len(targets) > 2:
        raise click.UsageError("check takes one spec, deployment or plan.json, or two instance specs")
    target = load_checked(targets)
    target.refuse_check(fmt)
    fmt = "json" if as_json else fmt
    target.print_check(fmt=fmt, severity=severity, verbose=verbose)
    return EXIT_FOUND_PROBLEM if any(f.severity == "ERROR" for f in target.findings()) else 0
