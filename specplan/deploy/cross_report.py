"""`specplan check` of a deployment: each instance's own findings, then the cross-instance ones.

JSON: {"findings": [cross-instance findings], "instances": {"prefill": [...], "decode": [...]}}
with each instance's findings as `specplan check SPEC --json` prints them.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from specplan.deploy.cross_checks import CrossFinding


def as_json(cross: Sequence[Any], own: Mapping[str, tuple[object, Sequence[Any]]]) -> dict[str, Any]:
    """`own`: role -> (its plan, its findings); a finding: anything with to_dict()."""
    return {"findings": [f.to_dict() for f in cross],
            "instances": {role: [f.to_dict() for f in found] for role, (_, found) in own.items()}}


def render(dep, cross: list[CrossFinding], own: dict, console: Console) -> None:
    from specplan.verify.report import render_findings

    for role, (built, found) in own.items():
        console.rule(f"{role}: {dep.prefill.file if role == 'prefill' else dep.decode.file}")
        render_findings(built, found, console)
    console.rule("across the instances")
    if not cross:
        console.print(f"{dep.name}: no findings across {dep.prefill.file} and {dep.decode.file}; "
                      "the instances agree on layer names, draft layers, taps, KV layout and the "
                      "handoff counts", markup=False, soft_wrap=True)
        return
    table = Table(title=f"{dep.name}: findings across the instances", title_justify="left",
                  show_lines=True)
    for col in ("severity", "kind", "prefill", "decode", "finding", "fix"):
        table.add_column(col, overflow="fold")
    for f in cross:
        table.add_row(f.severity, f.kind, escape(f.where[0]), escape(f.where[1]),
                      escape(f.message), escape(f.fix))
    console.print(table)
    counts = {s: sum(1 for f in cross if f.severity == s) for s in ("ERROR", "WARN")}
    console.print(", ".join(f"{n} {s}" for s, n in counts.items()))
