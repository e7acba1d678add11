"""The planner: one pass per file, run as one ordered pipeline.

Each pass module has a NAME, REQUIRES and ENSURES (its contract, passes/contracts.py) and
`run(p)`. The pipeline checks the contract around every pass and the IR invariants after it;
`plan(spec, upto=NAME)` stops after the named pass (what the pass tests plan up to).
"""

from __future__ import annotations

from typing import Protocol

from specplan.ir import check_ir
from specplan.engines import build_mesh, convention
from specplan.passes import (assign_groups, build_round, contracts, dp_agreement, fuse_converges,
                             insert_converges, moe_rows, pin_widths, pipeline_stages, plan_gates,
                             schedule)
from specplan.passes.context import Planning
from specplan.schema import Spec


class Pass(Protocol):
    """A pass module: its name, its contract and its body."""

    @property
    def NAME(self) -> str: ...

    @property
    def REQUIRES(self) -> tuple[contracts.Condition, ...]: ...

    @property
    def ENSURES(self) -> tuple[contracts.Condition, ...]: ...

    def run(self, p: Planning) -> None: ...


PASSES: tuple[Pass, ...] = (
    build_round,
    assign_groups,
    plan_gates,
    insert_converges,
    fuse_converges,
    pin_widths,
    dp_agreement,
    pipeline_stages,
    moe_rows,
    schedule,
)
NAMES = tuple(pass_.NAME for pass_ in PASSES)


def plan(spec: Spec, upto: str | None = None) -> Planning:
    """Run the passes over the spec's round graph, in order, through `upto` (default: all).

    Around each pass its contract is checked (REQUIRES before, ENSURES after), then the IR
    invariants; a pass that breaks either raises IRError naming the pass.
    """
    if upto is not None and upto not in NAMES:
        raise ValueError(f"no pass {upto!r}; passes: {', '.join(NAMES)}")
    p = Planning(spec, build_mesh(spec), convention(spec.engine).method(spec.speculative.method))
    for pass_ in PASSES:
        run_pass(p, pass_)
        if pass_.NAME == upto:
            break
    return p


def run_pass(p: Planning, pass_: Pass) -> None:
    """One pass with its contract and the IR checks: what `plan` does per pass."""
    contracts.check(p, pass_.REQUIRES, pass_name=pass_.NAME, side="requires")
    pass_.run(p)
    p.graph.passes_run.append(pass_.NAME)
    contracts.check(p, pass_.ENSURES, pass_name=pass_.NAME, side="ensures")
    check_ir(p.graph, p.draft, after=pass_.NAME)


__all__ = ["NAMES", "PASSES", "Pass", "Planning", "plan", "run_pass"]
