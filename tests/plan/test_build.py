"""plan/build.py: the passes' draft goes to plan.json's one reader as it is, so the draft's
classes keep the plan's fields, a malformed draft fails naming its dotted path, and
`specplan.compile` is every pass and then build_plan."""

from __future__ import annotations

import dataclasses

import pytest

import specplan
from specplan.ir import draft, records
from specplan.lower import build_plan
from specplan.mesh.pipeline import Stage as MeshStage
from specplan.passes import plan
from specplan.plan import artifact, model
from specplan.plan.codec import Problem
from specplan.schema import load_spec
from tests.helpers import COLUMN_SPEC

PAIRS = [
    (draft.BoundaryDraft, model.Boundary), (MeshStage, model.Stage),
    (draft.RelayDraft, model.Relay), (draft.RelaysDraft, model.Relays),
    (draft.PipelineDraft, model.Pipeline),
]
# What a pass makes whole is drafted as the plan's own object (ir/records.py).
SHARED = ["Field", "Layout", "Unfused", "Drafter", "TapProducers", "Link", "Routing",
          "SampledRows", "DpAgreement", "MoeRows", "RankClass", "Program", "Op"]


def names(cls) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


@pytest.mark.parametrize("drafted, typed", PAIRS, ids=lambda c: c.__name__)
def test_each_draft_class_has_its_plan_objects_fields_in_order(drafted, typed):
    assert names(drafted) == names(typed)


@pytest.mark.parametrize("name", SHARED)
def test_the_plans_leaf_objects_are_the_drafts_own(name):
    assert getattr(model, name) is getattr(records, name)


def test_the_draft_holds_plan_fields_in_plan_order():
    facts = [n for n in names(draft.Draft) if n != "pp"]  # pp: what the IR checks read
    plan_fields = names(artifact.Plan)
    assert facts == [n for n in plan_fields if n in facts]


@pytest.fixture
def spec(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(COLUMN_SPEC)
    return load_spec(path)


def test_compile_is_every_pass_then_build_plan(spec):
    assert specplan.compile(spec).dumps() == build_plan(plan(spec)).dumps()


def test_a_malformed_draft_fails_naming_its_path(spec):
    p = plan(spec)
    p.draft.boundaries[0].buffer_bytes = -1
    p.draft.pipeline.relay.sites[0].mode = "sideways"
    with pytest.raises(Problem) as err:
        build_plan(p)
    assert err.value.problems == [
        ("boundaries[0].buffer_bytes", "must be >= 0, found -1"),
        ("pipeline.relay.sites[0].mode", "expected one of ['broadcast', 'column', 'ring'], found 'sideways'")]


def test_a_fact_no_pass_filled_is_a_missing_key(spec):
    p = plan(spec, upto="fuse_converges")
    with pytest.raises(Problem, match=r"boundaries\[0\]\.layout: missing key"):
        build_plan(p)
