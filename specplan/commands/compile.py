"""`specplan compile`: plan.json (torch-free) and, with torch, the runtime module beside it; a
deployment: a plan per instance and the KV handoff. Every file or none."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from specplan.commands.common import console
from specplan.commands.fit import echo
from specplan.commands.load import load_spec_arg
from specplan.commands.target import Refused, Target, gate
from specplan.errors import EXIT_FOUND_PROBLEM


def compiled(target: Target, out: Path | None, *, runtime: bool) -> tuple[Any, list[str]]:
    """Compile for the CLI and the API alike: check's ERROR refuses (Refused, nothing
    written); else, with `out`, every file written there or none (`runtime`: the runtime
    modules too). (the plan, the lines saying what was written)."""
    gate(target)
    said = list(target.write(out, runtime=runtime)) if out is not None else []
    return target.compiled(), said


def run(spec: str, out_dir: str | None) -> int:
    target = load_spec_arg(spec)
    try:
        _, said = compiled(target, Path(out_dir or f"build/{target.name}"), runtime=True)
    except Refused:
        target.print_refused(console())
        echo("no plan written: the verifier found errors (see `specplan check`)", err=True)
        return EXIT_FOUND_PROBLEM
    for line in said:
        echo(line)
    return 0
