"""The verifier: proves DESIGN.md §7 on a plan, or reports findings. No torch, no spec needed."""

from __future__ import annotations

from specplan.plan import Plan, PlanView
from specplan.verify.agreement import check_agreement
from specplan.verify.engine_notes import check_engine
from specplan.verify.findings import Finding, sort_findings
from specplan.verify.fixes import engine_fixes
from specplan.verify.gates import check_gates
from specplan.verify.launch_flags import check_launch_flags
from specplan.verify.mixed import check_mixed
from specplan.verify.schedules import check_schedules
from specplan.verify.structure import check_structure


def verify(plan: Plan) -> list[Finding]:
    view = PlanView(plan)
    findings = [*check_structure(view), *check_agreement(view), *check_schedules(view), *check_launch_flags(view),
                *check_mixed(view),
                *check_engine(plan.engine, plan.world_size, plan.num_worlds)]
    # Gate fixes name the group to agree over, not a site switch: engine_fixes leaves them.
    return sort_findings(engine_fixes(plan, findings) + check_gates(view))


def has_errors(findings: list[Finding]) -> bool:
    return any(f.severity == "ERROR" for f in findings)


__all__ = ["Finding", "has_errors", "verify"]
