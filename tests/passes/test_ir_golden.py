"""Golden round graphs: `specplan.ir.render` of three golden-plan specs after every pass
(tests/golden/ir/<name>.ir: one block per pass, in pipeline order, with the draft's facts
filled by then (printed as "sections"); a pass that leaves the graph as it was says so instead of repeating it).
Regenerate with SPECPLAN_UPDATE_GOLDEN=1 and review the diff."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from specplan.ir import render
from specplan.engines import build_mesh
from specplan.methods import get_method
from specplan.passes import PASSES, Planning, run_pass
from specplan.schema import load_spec

ROOT = Path(__file__).parents[2]
NAMES = ("dspark-greedy-pp2", "eagle-tree-sampling-dpattn", "dflash-sampling-pp3")
UPDATE = os.environ.get("SPECPLAN_UPDATE_GOLDEN") == "1"


def snapshots(spec) -> str:
    p = Planning(spec, build_mesh(spec), get_method(spec.speculative.method))
    blocks, before = [], ""
    for pass_ in PASSES:
        run_pass(p, pass_)
        graph = render(p.graph)
        head = (f"## after {pass_.NAME}: {len(p.graph.nodes())} nodes; sections "
                f"{', '.join(sorted(p.draft.filled()))}")
        blocks.append(head + "\n" + (graph if graph != before else "(graph unchanged)\n"))
        before = graph
    return "\n".join(blocks)


@pytest.mark.parametrize("name", NAMES)
def test_ir_after_every_pass_matches_golden(name: str):
    got = snapshots(load_spec(ROOT / "tests" / "golden" / "plans" / f"{name}.yaml"))
    golden = ROOT / "tests" / "golden" / "ir" / f"{name}.ir"
    if UPDATE:
        golden.write_text(got)
    assert got == golden.read_text()
