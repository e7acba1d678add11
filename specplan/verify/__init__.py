"""The verifier: proves DESIGN.md §7 on a plan, or reports findings. No torch, no spec needed."""

from __future__ import annotations

from typing import Protocol, Sequence, TypeVar

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


class Severe(Protocol):
    """A finding of any kind (a plan's Finding, a deployment's CrossFinding): its severity."""

    @property
    def severity(self) -> str: ...


S = TypeVar("S", bound=Severe)


def errors(findings: Sequence[S]) -> list[S]:
    """The findings that refuse a plan: the one place "is there an ERROR" is written."""
    return [f for f in findings if f.severity == "ERROR"]


def has_errors(findings: Sequence[Severe]) -> bool:
    return bool(errors(findings))


__all__ = ["Finding", "errors", "has_errors", "verify"]
