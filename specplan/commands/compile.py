"""`specplan compile`: plan.json (torch-free) and, with torch, the runtime module beside it; a
deployment: a plan per instance and the KV handoff."""

from __future__ import annotations

from pathlib import Path

from specplan.commands.common import EXIT_FOUND_PROBLEM, console
from specplan.commands.fit import echo
from specplan.commands.load import load_spec_arg


def run(spec: str, out_dir: str | None) -> int:
    target = load_spec_arg(spec)
    if any(f.severity == "ERROR" for f in target.findings()):
        target.print_refused(console())
        echo("no plan written: the verifier found errors (see `specplan check`)", err=True)
        return EXIT_FOUND_PROBLEM
    for line in target.write(Path(out_dir or f"build/{target.name}"), runtime=True):
        echo(line)
    return 0
