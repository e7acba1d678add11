"""`specplan check`: a spec, a deployment, a plan.json or two instance specs, proved or listed."""

from __future__ import annotations

import sys

import click

from specplan.commands.common import EXIT_FOUND_PROBLEM, console, is_plan_file


def run(targets: tuple[str, ...], *, as_json: bool, fmt: str, severity: str, verbose: bool) -> int:
    from specplan.verify import has_errors, verify
    from specplan.verify import formats
    from specplan.verify.report import subject_of

    if len(targets) > 2:
        raise click.UsageError("check takes one spec, deployment or plan.json, or two instance specs")
    loaded = None
    if len(targets) == 2 or not is_plan_file(targets[0]):
        from specplan.commands import deployment
        from specplan.deploy import InstancePair, load_pair, load_target

        loaded = load_pair(*targets) if len(targets) == 2 else load_target(targets[0])
        if isinstance(loaded, InstancePair):
            if fmt in ("sarif", "junit"):
                raise click.UsageError(f"--format {fmt} reports one spec; a deployment prints "
                                       "text or json")
            return deployment.check(loaded, as_json or fmt == "json", console())
    if loaded is None:
        from specplan.plan import load_plan

        plan = load_plan(targets[0])
    else:
        from specplan.plan.build import compile

        plan = compile(loaded)
    findings = verify(plan)
    shown = formats.at_least(findings, severity)
    fmt = "json" if as_json else fmt
    subject = subject_of(plan)
    if fmt == "json":
        text = formats.to_json(shown)
    elif fmt == "sarif":
        text = formats.to_sarif(subject, shown)
    elif fmt == "junit":
        text = formats.to_junit(subject, shown)
    else:
        filtered = len(findings) if len(shown) != len(findings) else None
        text = formats.render_text(subject, shown, width=formats.terminal_width(), verbose=verbose,
                                   shown_of=filtered)
    sys.stdout.write(text)
    return EXIT_FOUND_PROBLEM if has_errors(findings) else 0
