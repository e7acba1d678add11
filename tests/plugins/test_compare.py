"""compare(): the start-up check without an engine, on golden plans."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specplan.mesh.family import from_rule
from specplan.plugins import SPEC_KEYS, compare, format_ranks, plan_settings
from specplan.plan import PlanView

PLANS = Path(__file__).parents[1] / "golden" / "plans"
DPATTN = PLANS / "dspark-greedy-dpattn.json"  # sglang tp 4, dp 2, dp_attention, ep 4


def engine_view(path: Path) -> tuple[dict, dict]:
    """What an engine that built exactly the plan would pass: every family, every setting."""
    plan = json.loads(path.read_text())
    groups = {f["name"]: from_rule(f["name"], f["rule"]).groups() for f in plan["families"]
              if f["name"] not in ("replica", "replica_stage")}
    return groups, plan_settings(PlanView(plan))


@pytest.mark.parametrize("path", sorted(PLANS.glob("*.json")), ids=lambda p: p.stem)
def test_the_plans_own_deployment_has_no_findings(path):
    groups, spec = engine_view(path)
    assert compare(path, groups, spec) == []


def test_a_tp_wide_attn_tp_is_named_with_both_values_for_this_rank():
    groups, spec = engine_view(DPATTN)
    groups["attn_tp"] = [[0, 1, 2, 3]]  # the engine started without DP-attention
    [f] = compare(DPATTN, groups, spec, rank=3)
    assert (f.severity, f.group, f.round) == ("ERROR", "attn_tp", "startup")
    assert f.message == "attn_tp: engine [0..3], plan [2,3]"
    [f] = compare(json.loads(DPATTN.read_text()), groups, spec)  # loaded content; first differing rank
    assert f.message == "attn_tp: engine [0..3], plan [0,1]" and f.ranks == (0,)


def test_member_order_matters_because_it_fixes_the_source():
    groups, spec = engine_view(DPATTN)
    groups["attn_tp"] = [[1, 0], [2, 3]]
    [f] = compare(DPATTN, groups, spec)
    assert f.message == "attn_tp: engine [1,0], plan [0,1]"


def test_each_differing_setting_is_one_finding_naming_the_key():
    groups, spec = engine_view(DPATTN)
    engine = dict(spec, num_steps=3, method="DSPARK", aux_layers=[1, 3, 4], topk=None)
    found = {f.decision: f.message for f in compare(DPATTN, groups, engine)}
    assert found == {"num_steps": "num_steps: engine 3, plan 5",
                     "aux_layers": "aux_layers: engine [1,3,4], plan [2,4,5]"}


def test_a_family_the_plan_lacks_is_an_error_unless_singletons():
    groups, spec = engine_view(DPATTN)
    assert compare(DPATTN, dict(groups, shared_experts_tp=[[0], [1], [2], [3]]), spec) == []
    [f] = compare(DPATTN, dict(groups, shared_experts_tp=[[0, 1], [2, 3]]), spec)
    assert f.group == "shared_experts_tp" and "plan has no shared_experts_tp family" in f.message


def test_unknown_spec_keys_are_a_caller_bug():
    with pytest.raises(ValueError, match="valid"):
        compare(DPATTN, {}, {"speculative_algorithm": "DSPARK"})
    assert set(plan_settings(PlanView(json.loads(DPATTN.read_text())))) == set(SPEC_KEYS)


@pytest.mark.parametrize("ranks, text", [([0, 1], "[0,1]"), (range(16), "[0..15]"), ([0, 4, 8], "[0,4,8]"),
                                         ([0, 1, 2, 5, 6], "[0..2,5,6]"), ([], "[]")])
def test_format_ranks(ranks, text):
    assert format_ranks(ranks) == text
