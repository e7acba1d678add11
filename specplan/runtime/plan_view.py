"""The runtime's name for the plan's view (specplan/plan/view.py): the one PlanView."""

from specplan.ir.nodes import RELAY_ID_BASE
from specplan.plan.model import Field
from specplan.plan.view import HEADER_FIELDS, GuardedCollective, PlanView, fingerprint_int64

__all__ = ["HEADER_FIELDS", "RELAY_ID_BASE", "Field", "GuardedCollective", "PlanView", "fingerprint_int64"]
