"""Invariant checks the pipeline runs after every pass.

They guard the IR's shape (a DAG whose edges point at real nodes, converges that carry
their site's decisions, groups that name real families); proving the plan *safe* is the
verifier's job (`specplan check`).
"""

from __future__ import annotations

from specplan.ir.draft import ABSENT, Draft
from specplan.ir.graph import StageGraph


class IRError(AssertionError):
    """A pass broke an IR invariant: a bug in specplan, never the user's input."""


def check_ir(graph: StageGraph, draft: Draft, after: str) -> None:
    problems = []
    if not graph.is_acyclic():
        problems.append(f"the round graph has a cycle: {' -> '.join(graph.cycle())}")
    families = draft.families or {}
    for node in graph.nodes("converge"):
        inputs = {c for p in graph.predecessors(node) for c in graph.edge(p, node)["carries"]}
        missing = set(node.attr("decisions", ())) - inputs
        if missing:
            problems.append(f"{node.id} converges {sorted(missing)} but no edge brings them")
        family = node.attr("family")
        if family is not None and families and family not in families:
            problems.append(f"{node.id} names group family {family!r}, which the plan lacks")
    for node in graph.nodes():
        if node.stage < 0 or (draft.pp is not ABSENT and node.stage >= draft.pp):
            problems.append(f"{node.id} sits on a stage outside the pipeline")
    if problems:
        raise IRError(f"after pass {after!r}: " + "; ".join(problems))


__all__ = ["IRError", "check_ir"]
