"""Pass contracts are executable: every pass declares REQUIRES / ENSURES, the pipeline checks
both, a pass run out of order or one that breaks its promise fails naming the pass, and
`plan(spec, upto=...)` stops after the named pass."""

from __future__ import annotations

import pytest

from specplan.ir import IRError
from specplan.ir.draft import ABSENT, Draft, SiteDraft
from specplan.engines import build_mesh
from specplan.methods import get_method
from specplan.passes import NAMES, PASSES, Planning, contracts, plan, run_pass
from specplan.schema import load_spec
from tests.helpers import COLUMN_SPEC


@pytest.fixture
def spec(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(COLUMN_SPEC)
    return load_spec(path)


def fresh(spec) -> Planning:
    return Planning(spec, build_mesh(spec), get_method(spec.speculative.method))


def test_every_pass_declares_a_contract_that_holds_after_it(spec):
    p = fresh(spec)
    for pass_ in PASSES:
        assert isinstance(pass_.REQUIRES, tuple) and isinstance(pass_.ENSURES, tuple), pass_.NAME
        assert pass_.ENSURES, f"{pass_.NAME} promises nothing"
        run_pass(p, pass_)
        for condition in pass_.ENSURES:
            assert contracts.holds(p, condition), (pass_.NAME, condition)


def test_each_pass_requires_what_an_earlier_pass_ensures():
    ensured: set = set()
    for pass_ in PASSES:
        assert set(pass_.REQUIRES) <= ensured, (pass_.NAME, set(pass_.REQUIRES) - ensured)
        ensured |= set(pass_.ENSURES)


def test_a_pass_run_out_of_order_names_what_it_lacks(spec):
    p = fresh(spec)
    run_pass(p, PASSES[0])
    schedule = PASSES[NAMES.index("schedule")]
    with pytest.raises(IRError, match=r"pass 'schedule' requires moe, dp_agreement, .*a pass before it did not run"):
        run_pass(p, schedule)


def test_a_pass_that_breaks_its_promise_fails_after_it(spec, monkeypatch):
    pin = PASSES[NAMES.index("pin_widths")]
    monkeypatch.setattr(pin, "run", lambda p: None)  # lays nothing out
    with pytest.raises(IRError, match=r"pass 'pin_widths' ensures boundaries\[\]\.layout, .*did not provide"):
        plan(spec)


def test_upto_stops_after_the_named_pass(spec):
    p = plan(spec, upto="fuse_converges")
    assert p.graph.passes_run == list(NAMES[: NAMES.index("fuse_converges") + 1])
    assert p.draft.boundaries is not ABSENT and p.draft.buffer_bytes is ABSENT
    assert plan(spec).graph.passes_run == list(NAMES)
    with pytest.raises(ValueError, match="no pass 'pin_width'; passes: build_round, "):
        plan(spec, upto="pin_width")


def site(name: str, **filled) -> SiteDraft:
    return SiteDraft(name=name, round="decode", phase="accept", kind="broadcast", decisions=(),
                     family="replica", source_member=0, readers="all_stages", startup=False, **filled)


def test_conditions_walk_lists_and_dicts():
    class P:  # the two things `holds` reads: the draft and the graph
        draft = Draft(sites={"a": site("a", converge=True), "b": site("b")}, moe=None)

        class graph:
            @staticmethod
            def nodes():
                return []

    p, D = P(), contracts.DRAFT
    assert not contracts.holds(p, D.sites.each.converge) and contracts.holds(p, D.sites)
    assert contracts.holds(p, D.sites.each.family)
    assert contracts.holds(p, D.moe) and contracts.holds(p, D.moe.a2a)  # optional, left None
    assert not contracts.holds(p, contracts.GRAPH) and not contracts.holds(p, D.rank_classes)
    assert not contracts.holds(p, D.pipeline.stages)


def test_conditions_name_typed_attributes():
    D = contracts.DRAFT
    assert str(D.pipeline.relay.sites.each.buffer_bytes) == "pipeline.relay.sites[].buffer_bytes"
    assert D.sites.each.family == D.sites.each.family and D.sites != D.sites.each
    with pytest.raises(AttributeError, match="SiteDraft has no attribute 'familly'"):
        D.sites.each.familly  # a typo fails where the contract is written, not when it is checked
    with pytest.raises(AttributeError, match="Draft has no attribute 'section'"):
        D.section
