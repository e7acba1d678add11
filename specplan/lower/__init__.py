"""Lowering: the plan.json artifact (no torch) and the generated runtime module (torch)."""

from specplan.plan import fingerprint
from specplan.plan.build import build_plan, write_plan

__all__ = ["build_plan", "fingerprint", "write_plan"]
