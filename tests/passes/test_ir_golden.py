"""Golden round graphs: `specplan.ir.render` of three golden-plan specs after every pass
(tests/golden/ir/<name>.ir). Regenerate with SPECPLAN_UPDATE_GOLDEN=1 and review the diff."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from specplan.ir import render
from specplan.passes import plan
from specplan.schema import load_spec

ROOT = Path(__file__).parents[2]
NAMES = ("dspark-greedy-pp2", "eagle-tree-sampling-dpattn", "dflash-sampling-pp3")
UPDATE = os.environ.get("SPECPLAN_UPDATE_GOLDEN") == "1"


@pytest.mark.parametrize("name", NAMES)
def test_ir_matches_golden(name: str):
    got = render(plan(load_spec(ROOT / "tests" / "golden" / "plans" / f"{name}.yaml")).graph)
    golden = ROOT / "tests" / "golden" / "ir" / f"{name}.ir"
    if UPDATE:
        golden.write_text(got)
    assert got == golden.read_text()
