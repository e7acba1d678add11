"""`specplan compile`: plan.json (torch-free) and, with torch, the runtime module beside it; a
deployment: a plan per instance and the KV handoff."""

from __future__ import annotations

from pathlib import Path

import click

from specplan.commands.common import EXIT_FOUND_PROBLEM, console, load_spec_arg


def run(spec: str, out_dir: str | None) -> int:
    from specplan.commands import deployment
    from specplan.deploy import InstancePair
    from specplan.files import staged_dir
    from specplan.lower import write_plan
    from specplan.plan.build import compile
    from specplan.verify import has_errors, verify
    from specplan.verify.report import render_findings

    loaded = load_spec_arg(spec)
    if isinstance(loaded, InstancePair):
        return deployment.compile_(loaded, out_dir, console(), write_runtime_module)
    plan = compile(loaded)
    findings = verify(plan)
    if has_errors(findings):
        render_findings(plan, findings, console())
        click.echo("no plan written: the verifier found errors (see `specplan check`)", err=True)
        return EXIT_FOUND_PROBLEM
    out = Path(out_dir or f"build/{loaded.name}")
    # every file or none: a failure leaves `out` as it was; another plan's module goes
    with staged_dir(out, replaces="runtime_*.py") as stage:
        write_plan(plan, stage)
        note = write_runtime_module(plan, stage)
    click.echo(f"wrote {out / 'plan.json'} (fingerprint {plan.fingerprint[:16]}, "
               f"{len(plan.boundaries)} converge boundaries, {len(plan.rank_classes)} rank classes)")
    click.echo(note.format(out=out))
    return 0


def write_runtime_module(plan, out_dir) -> str:
    """The torch half of compile, imported only after plan.json is written; a runtime module
    of another plan in `out_dir` is removed (it would sit beside a plan it does not run)."""
    from specplan.files import remove_stale

    try:
        from specplan.lower.fx_module import write_runtime_module as write
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] != "torch":
            raise
        remove_stale(out_dir, "runtime_*.py", keep=set())
        return "runtime module: skipped (torch is not installed; pip install 'specplan[runtime]')"
    name = write(plan, out_dir).name
    remove_stale(out_dir, "runtime_*.py", keep={name})
    return "wrote {out}/" + name + " (runtime module)"
