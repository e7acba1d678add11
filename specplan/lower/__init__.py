"""Lowering: the plan.json artifact (no torch) and the generated runtime module (torch)."""

from specplan.lower.plan import build_plan, fingerprint, write_plan

__all__ = ["build_plan", "fingerprint", "write_plan"]
