"""docs/plan.schema.json is a valid draft 2020-12 schema and every golden plan satisfies it."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest

ROOT = Path(__file__).parents[2]
SCHEMA = json.loads((ROOT / "docs" / "plan.schema.json").read_text())
PLANS = sorted((ROOT / "tests" / "golden" / "plans").glob("*.json"))
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def test_schema_is_valid():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert len(PLANS) == 72


@pytest.mark.parametrize("path", PLANS, ids=lambda p: p.stem)
def test_golden_plan_validates(path: Path):
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in VALIDATOR.iter_errors(json.loads(path.read_text()))]
    assert not errors, "\n".join(errors)


def test_schema_rejects_a_stray_key_and_a_misaligned_field():
    plan = json.loads((ROOT / "tests" / "golden" / "plans" / "dspark-greedy-pp2.json").read_text())
    stray = copy.deepcopy(plan)
    stray["ranks"] = list(range(4))  # the file must not grow with ranks
    assert not VALIDATOR.is_valid(stray)
    misaligned = copy.deepcopy(plan)
    misaligned["boundaries"][1]["layout"]["fields"][0]["offset"] = 36
    assert not VALIDATOR.is_valid(misaligned)
