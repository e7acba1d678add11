"""The round graph: node types, the networkx-backed StageGraph, its printer and invariants."""

from specplan.ir.checks import IRError, check_ir
from specplan.ir.graph import StageGraph
from specplan.ir.nodes import KINDS, Node, node_id
from specplan.ir.printer import render

__all__ = ["IRError", "KINDS", "Node", "StageGraph", "check_ir", "node_id", "render"]
