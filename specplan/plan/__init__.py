"""The plan: one typed, frozen object from the planner to the verifier, the runtime and the tools.

    model.py     one frozen dataclass per object of plan.json, fields in key order
    artifact.py  Plan: the whole document, its fingerprint, the lookups readers share
    view.py      PlanView: the bound plan as the runtime reads it (guarded collectives, programs)
    load.py      load_plan: plan.json -> Plan, every key checked, hand edits refused
    build.py     compile: a Spec -> Plan; build_plan: the passes' draft -> Plan (imported on its
                 own: it needs the planner)
    codec.py     JSON <-> dataclasses from their type hints

Nothing outside this package indexes plan content by key (tests/plan/test_plan_access.py).
"""

from specplan.plan.artifact import SCHEMA_VERSION, Plan, canonical, fingerprint
from specplan.plan.codec import ABSENT, given, opt
from specplan.plan.load import PlanFileError, from_json, load_plan
from specplan.plan.view import PlanView

__all__ = ["ABSENT", "SCHEMA_VERSION", "Plan", "PlanFileError", "PlanView", "canonical",
           "fingerprint", "from_json", "given", "load_plan", "opt"]
