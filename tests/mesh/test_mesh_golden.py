"""Golden `explain --json` output: tests/golden/explain/<name>.yaml in, <name>.json out.

The sglang §1.4 and vllm §4 examples' JSON was written by hand from the reference tables;
the rest was generated with SPECPLAN_UPDATE_GOLDEN=1 and reviewed. Only the stable keys are
compared, so later issues may add keys to the JSON without touching these files.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from specplan.views.explain import explain_data
from specplan.engines import build_mesh
from specplan.schema import load_spec

GOLDEN = Path(__file__).parents[1] / "golden" / "explain"
KEYS = ("world_size", "num_worlds", "engine", "widths", "groups", "ranks", "replicas", "stages")
UPDATE = os.environ.get("SPECPLAN_UPDATE_GOLDEN") == "1"
SPECS = sorted(GOLDEN.glob("*.yaml"))


def explain_json(path: Path) -> dict:
    spec = load_spec(path)
    return json.loads(json.dumps(explain_data(spec, build_mesh(spec))))


def test_enough_goldens():
    assert len(SPECS) >= 10


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_explain_matches_golden(path: Path):
    got = explain_json(path)
    expected_path = path.with_suffix(".json")
    if UPDATE:
        expected_path.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    expected = json.loads(expected_path.read_text())
    for key in KEYS:
        assert got[key] == expected[key], f"{path.name}: {key} differs from {expected_path.name}"
