"""The planner: one pass per file, run as one ordered pipeline, IR checked after each."""

from __future__ import annotations

from specplan.ir import check_ir
from specplan.mesh import build_mesh
from specplan.methods import get_method
from specplan.passes import (assign_groups, build_round, dp_agreement, fuse_converges,
                             insert_converges, moe_rows, pin_widths, pipeline_stages, schedule)
from specplan.passes.context import Planning
from specplan.schema import Spec

PASSES = (
    build_round,
    assign_groups,
    insert_converges,
    fuse_converges,
    pin_widths,
    dp_agreement,
    pipeline_stages,
    moe_rows,
    schedule,
)


def plan(spec: Spec) -> Planning:
    """Run every pass over the spec's round graph."""
    p = Planning(spec, build_mesh(spec), get_method(spec.speculative.method))
    for pass_ in PASSES:
        pass_.run(p)
        p.graph.passes_run.append(pass_.NAME)
        check_ir(p.graph, after=pass_.NAME)
    return p


__all__ = ["PASSES", "Planning", "plan"]
