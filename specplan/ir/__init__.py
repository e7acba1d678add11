"""The round graph: node types, the networkx-backed StageGraph, its printer and invariants;
and the plan's draft the passes fill beside it (ir/draft.py)."""

from specplan.ir.checks import IRError, check_ir
from specplan.ir.draft import ABSENT, Draft
from specplan.ir.graph import StageGraph
from specplan.ir.nodes import KINDS, Node, node_id
from specplan.ir.printer import render

__all__ = ["ABSENT", "Draft", "IRError", "KINDS", "Node", "StageGraph", "check_ir", "node_id", "render"]
