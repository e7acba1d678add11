"""engines/reads.py's protocols name only what the real types have (mypy checks their types
wherever one is passed in; this checks the names without mypy, on real objects)."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

import specplan
from specplan.deploy.geometry import geometry
from specplan.engines import reads
from specplan.schema import load_spec

SPECS = Path(__file__).resolve().parents[2] / "specs"


def members(protocol: type) -> list[str]:
    """The attributes and methods `protocol` declares (its own properties and functions)."""
    return [name for name, value in vars(protocol).items()
            if isinstance(value, property) or inspect.isfunction(value)]


@pytest.fixture(scope="module")
def real_objects() -> dict[type, object]:
    """One real object per protocol: a MoE spec with DP-attention (its parts), one of its
    instances' geometry and its plan's MoE rows."""
    spec = load_spec(SPECS / "qwen3-next-mtp-dpattn-ep8.yaml")
    assert spec.model.moe is not None
    plan = specplan.compile(spec)
    assert plan.moe is not None
    return {reads.Spec: spec, reads.Topology: spec.topology, reads.Model: spec.model,
            reads.Moe: spec.model.moe, reads.Speculative: spec.speculative,
            reads.Sync: spec.sync, reads.Geometry: geometry("decode", spec),
            reads.MoeRows: plan.moe}


PROTOCOLS = [reads.Spec, reads.Topology, reads.Model, reads.Moe, reads.Speculative, reads.Sync,
             reads.Disaggregation, reads.Geometry, reads.MoeRows]


def test_every_protocol_is_checked_here():
    declared = [v for v in vars(reads).values()
                if isinstance(v, type) and v.__module__ == reads.__name__]
    assert sorted(p.__name__ for p in declared) == sorted(p.__name__ for p in PROTOCOLS)


@pytest.mark.parametrize("protocol", [p for p in PROTOCOLS if p is not reads.Disaggregation],
                         ids=lambda p: p.__name__)
def test_the_real_type_has_every_member(protocol, real_objects):
    obj = real_objects[protocol]
    missing = [m for m in members(protocol) if not hasattr(obj, m)]
    assert not missing, f"{type(obj).__name__} lacks {missing} that engines/reads.py declares"


def test_a_deployment_instance_has_the_disaggregation_members():
    spec = load_spec(SPECS / "disagg" / "llama-eagle-decode-tp4-dpattn2.yaml")
    assert spec.disaggregation is not None
    missing = [m for m in members(reads.Disaggregation) if not hasattr(spec.disaggregation, m)]
    assert not missing
