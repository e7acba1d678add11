"""Fixtures for pass tests: plan a spec written inline as YAML, up to a chosen pass."""

from __future__ import annotations

import pytest

from specplan.passes import Planning, plan
from specplan.schema import load_spec


@pytest.fixture
def planned(tmp_path):
    """planned(yaml_text, upto="schedule") -> Planning after passes up to and including `upto`."""

    def run(text: str, upto: str = "schedule") -> Planning:
        path = tmp_path / "spec.yaml"
        path.write_text(text)
        return plan(load_spec(path), upto=upto)

    return run
