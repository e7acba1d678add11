"""`specplan check`: a spec, a deployment, a plan.json or two instance specs, proved or listed;
against a baseline (verify/baseline.py), only what is new."""

from __future__ import annotations

import click

from specplan.commands.common import EXIT_FOUND_PROBLEM


def run(targets: tuple[str, ...], *, as_json: bool, fmt: str, severity: str, verbose: bool,
        baseline: str | None = None, write_baseline: str | None = None) -> int:
    from specplan.commands.load import load_checked
    from specplan.verify import has_errors
    from specplan.verify.baseline import read_baseline

    if len(targets) > 2:
        raise click.UsageError("check takes one spec, deployment or plan.json, or two instance specs")
    target = load_checked(targets)
    fmt = "json" if as_json else fmt
    target.refuse_check(fmt, baseline=bool(baseline or write_baseline))
    known = read_baseline(baseline) if baseline else None
    if write_baseline:
        target.write_baseline(write_baseline)
    target.print_check(fmt=fmt, severity=severity, verbose=verbose, baseline=known)
    found = target.findings() if known is None else target.new_findings(known)
    return EXIT_FOUND_PROBLEM if has_errors(found) else 0
