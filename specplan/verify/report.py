"""Reading what `specplan check` is given, and printing its findings."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from specplan.plan import Plan, load_plan
from specplan.verify.findings import Finding
from specplan.verify.formats import Subject


def plan_for(path: str) -> Plan:
    """A plan from plan.json (checked key by key, its fingerprint recomputed), or planned
    from a spec YAML."""
    if path.endswith(".json"):
        return load_plan(path)
    from specplan.plan.build import compile
    from specplan.schema import load_spec

    return compile(load_spec(path))


def subject_of(plan: Plan) -> Subject:
    """What `check` names in its report: plan name, spec file and fingerprint."""
    return Subject(plan.name, plan.source.spec_file, plan.fingerprint)


def render_findings(plan: Plan, findings: list[Finding], console: Console) -> None:
    spec_file = plan.source.spec_file
    if not findings:
        console.print(Text(f"{plan.name}: no findings; the plan is free of desyncs and deadlocks "
                           f"(fingerprint {plan.fingerprint[:16]})"))
        return
    table = Table(title=Text(f"{plan.name}: findings"), title_justify="left", show_lines=True)
    for col in ("severity", "where", "site / decision", "group, ranks", "round", "finding", "fix"):
        table.add_column(col, overflow="fold")
    for f in findings:
        where = f"{spec_file}:{f.line}" if f.line else spec_file or "-"
        what = " / ".join(x for x in (f.site, f.decision, f.gate and f"gate {f.gate}") if x) or "-"
        ranks = f"{f.group or '-'} {list(f.ranks) if f.ranks else ''}".strip()
        # Findings quote ids in brackets ([eagle3_target]): Text cells are never read as markup.
        table.add_row(_badge(f.severity), *(Text(x) for x in (where, what, ranks, f.round or "-",
                                                              f.message, f.fix)))
    console.print(table)
    counts = {s: sum(1 for f in findings if f.severity == s) for s in ("ERROR", "WARN", "INFO")}
    console.print(", ".join(f"{n} {s}" for s, n in counts.items()))


def _badge(severity: str) -> Text:
    return Text(severity, style={"ERROR": "bold red", "WARN": "yellow", "INFO": "dim"}[severity])
