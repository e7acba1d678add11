"""Fixtures for pass tests: plan a spec written inline as YAML, up to a chosen pass."""

from __future__ import annotations

import pytest

from specplan.ir import check_ir
from specplan.mesh import build_mesh
from specplan.methods import get_method
from specplan.passes import PASSES, Planning
from specplan.schema import load_spec


@pytest.fixture
def planned(tmp_path):
    """planned(yaml_text, upto="schedule") -> Planning after passes up to and including `upto`."""

    def run(text: str, upto: str = "schedule") -> Planning:
        path = tmp_path / "spec.yaml"
        path.write_text(text)
        spec = load_spec(path)
        p = Planning(spec, build_mesh(spec), get_method(spec.speculative.method))
        for pass_ in PASSES:
            pass_.run(p)
            p.graph.passes_run.append(pass_.NAME)
            check_ir(p.graph, after=pass_.NAME)
            if pass_.NAME == upto:
                break
        return p

    return run
