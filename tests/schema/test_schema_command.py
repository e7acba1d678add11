"""`specplan schema`: the JSON Schema of the YAML, its committed copy, the specs/ files it
must accept, and the README reference generated from it."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from specplan.schema.model import Spec
from specplan.schema.reference import END, START, readme_section, schema_text
from tests.helpers import cli

ROOT = Path(__file__).resolve().parents[2]
SPECS = sorted((ROOT / "specs").glob("*.yaml"))
REGEN = "regenerate with: python -m specplan.schema.reference --write"


@pytest.fixture(scope="module")
def schema() -> dict:
    res = cli("schema")
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def test_schema_is_a_valid_draft_2020_12_schema(schema):
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$id"] and schema["title"]


def test_every_field_has_a_description_and_every_optional_one_a_default(schema):
    models = [schema] + list(schema["$defs"].values())
    for model in models:
        required = set(model.get("required", ()))
        for name, prop in model["properties"].items():
            assert prop.get("description"), name
            assert name in required or "default" in prop, name


def test_schema_covers_every_model_field(schema):
    assert set(schema["properties"]) == set(Spec.model_fields)


def test_committed_schema_matches_the_command(schema):
    committed = (ROOT / "docs" / "spec.schema.json").read_text(encoding="utf-8")
    assert committed == schema_text(), f"docs/spec.schema.json is stale; {REGEN}"


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_specs_validate_and_name_the_schema(path, schema):
    text = path.read_text(encoding="utf-8")
    assert text.splitlines()[0] == "# yaml-language-server: $schema=../docs/spec.schema.json"
    jsonschema.validate(yaml.safe_load(text), schema)


def test_schema_rejects_what_the_loader_rejects(schema):
    doc = {"name": "x", "topology": {"tp": 0}, "model": {"num_layers": 1, "hidden_size": 1,
                                                          "vocab_size": 1}, "extra": 1}
    errors = sorted(e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(doc))
    assert errors == ["0 is less than the minimum of 1",
                      "Additional properties are not allowed ('extra' was unexpected)"]


def test_readme_reference_is_generated_from_the_schema():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start, end = text.index(START), text.index(END) + len(END)
    assert text[start:end] == readme_section(), f"README YAML reference is stale; {REGEN}"
    for key in ("topology.tp", "speculative.method", "sync.policy", "runtime.max_batch"):
        assert f"| `{key}` |" in text
