"""`specplan check`: a spec, a deployment, a plan.json or two instance specs, proved or listed;
against a baseline (verify/baseline.py), only what is new."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from specplan.errors import EXIT_FOUND_PROBLEM
from specplan.verify import has_errors

if TYPE_CHECKING:
    from specplan.commands.spec_target import PlanTarget
    from specplan.commands.target import AnyFinding, Target
    from specplan.verify.baseline import Baseline


def checked(target: Target | PlanTarget, *, fmt: str = "json", baseline: str | None = None,
            write_baseline: str | None = None) -> tuple[list[AnyFinding], Baseline | None]:
    """Check for the CLI and the API alike: (the findings that decide the verdict: every one,
    or with `baseline` those it does not hold; the baseline read). `write_baseline`: record
    today's findings there first."""
    from specplan.verify.baseline import read_baseline

    target.refuse_check(fmt, baseline=bool(baseline or write_baseline))
    known = read_baseline(baseline) if baseline else None
    if write_baseline:
        target.write_baseline(write_baseline)
    return (target.findings() if known is None else target.new_findings(known)), known


def run(targets: tuple[str, ...], *, as_json: bool, fmt: str, severity: str, verbose: bool,
        baseline: str | None = None, write_baseline: str | None = None) -> int:
    from specplan.commands.load import load_checked

    if len(targets) > 2:
        raise click.UsageError("check takes one spec, deployment or plan.json, or two instance specs")
    target = load_checked(targets)
    fmt = "json" if as_json else fmt
    found, known = checked(target, fmt=fmt, baseline=baseline, write_baseline=write_baseline)
    target.print_check(fmt=fmt, severity=severity, verbose=verbose, baseline=known)
    return EXIT_FOUND_PROBLEM if has_errors(found) else 0
