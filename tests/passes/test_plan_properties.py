"""Property tests: every random valid topology x method x sampling x policy plans, passes the
IR checks, and its plan keeps the planner's promises (DESIGN.md §7).

Specs are written as YAML to a temporary file and loaded, so the schema's cross checks
decide what is valid; examples the checks refuse are discarded.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from specplan.engines import convention
from specplan.errors import PlanError, SpecError
from specplan.lower import build_plan
from specplan.mesh.family import from_rule
from specplan.methods import METHODS
from specplan.passes import plan
from specplan.schema import load_spec
from tests.helpers import cli, draw_dp_attention_and_ep

METHOD_SETTINGS = {
    "none": {}, "eagle": {"num_steps": 3, "topk": 2, "num_draft_tokens": 5},
    "eagle3": {"num_steps": 2}, "mtp": {"num_steps": 1}, "standalone": {"num_steps": 3},
    "ngram": {"num_steps": 3}, "dflash": {"num_steps": 4}, "dspark": {"num_steps": 3},
}
POLICIES = ("safe", "all", "rng", "init", "off")
SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@st.composite
def specs(draw) -> dict:
    engine = draw(st.sampled_from(["sglang", "vllm"]))
    tp = draw(st.sampled_from([1, 2, 4]))
    pp = draw(st.sampled_from([1, 2, 3]))
    dp = draw(st.sampled_from([1, 2]))
    cp = draw(st.sampled_from([1, 2]))
    moe = draw(st.booleans())
    topo = {"tp": tp, "pp": pp, "dp": dp, "cp": cp}
    draw_dp_attention_and_ep(draw, engine, topo, moe)
    method = draw(st.sampled_from(sorted(METHODS)))
    speculative = {"method": method, **METHOD_SETTINGS[method]}
    if method not in ("eagle",) and "topk" in speculative:
        del speculative["topk"]
    if method != "none":
        speculative["sampling"] = draw(st.sampled_from(["greedy", "sampling", "mixed"]))
    model = {"num_layers": draw(st.sampled_from([6, 9])), "hidden_size": 64, "vocab_size": 128}
    if moe:
        model["moe"] = {"num_experts": 4, "top_k": 2, "a2a": draw(st.sampled_from(["none", "deepep"]))}
    spec = {"name": "prop", "engine": engine, "topology": topo, "model": model,
            "speculative": speculative, "sync": {"policy": draw(st.sampled_from(POLICIES))},
            "pipeline": {"relay": draw(st.sampled_from(["broadcast", "column", "ring"])),
                         "aux_routing": draw(st.sampled_from(["chain", "direct"]))},
            "runtime": {"max_batch": draw(st.sampled_from([1, 4]))}}
    return spec


def load(data: dict):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "spec.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        try:
            return load_spec(path)
        except SpecError:
            return None


def planned(data: dict):
    spec = load(data)
    assume(spec is not None)
    p = plan(spec)  # runs check_ir after every pass
    return p, build_plan(p)


def replica_groups(plan_json: dict) -> tuple[list[set[int]], int]:
    fams = {f["name"]: from_rule(f["name"], f["rule"]) for f in plan_json["families"]}
    return [set(g) for g in fams["replica"].groups()], plan_json["widths"]["pp"]


@SETTINGS
@given(specs())
def test_every_topology_plans_and_keeps_its_promises(data):
    p, out = planned(data)
    world = out["world_size"]
    fams = {f["name"]: from_rule(f["name"], f["rule"]) for f in out["families"]}
    replicas, pp = replica_groups(out)
    pp_group_rank = fams["pp"].group_ranks()
    for site in out["sites"]:
        groups = fams[site["family"]].groups()
        ranks = sorted(r for g in groups for r in g)
        assert ranks == list(range(world)), f"{site['name']}: groups do not partition the world"
        for group in groups:
            rep = next(r for r in replicas if group[0] in r)
            if site["family"] == "replica":
                assert set(group) == rep
            elif site["family"] == "replica_stage":
                stage = pp_group_rank[group[0]]
                assert set(group) == {r for r in rep if pp_group_rank[r] == stage}
            if site["family"] == "replica" or pp_group_rank[group[0]] == pp - 1:
                # a stage-local family converges on the last stage's groups only
                src = group[site["source_member"]]
                assert pp_group_rank[src] == pp - 1 and src == min(
                    r for r in rep if pp_group_rank[r] == pp - 1), "source is not the replica's first last-stage rank"
        assert all(d["bytes"] > 0 for d in site["decisions"])
    for b in out["boundaries"]:
        assert b["layout"]["bytes"] > 0
        if b["op"] == "broadcast":
            assert b["buffer_bytes"] == out["buffer_bytes"][b["family"]]
            assert b["buffer_bytes"] == max(x["layout"]["bytes"] for x in out["boundaries"]
                                            if x["family"] == b["family"] and x["op"] == "broadcast")
        else:
            assert b["buffer_bytes"] == b["layout"]["bytes"]
        for f in b["layout"]["fields"]:
            assert f["offset"] % 8 == 0 and f["offset"] >= b["layout"]["header_bytes"]


@SETTINGS
@given(specs())
def test_every_group_issues_its_collectives_in_one_order(data):
    _, out = planned(data)
    # Members of one replica-wide group sit on every stage: each stage's program must list
    # that family's collectives in the same order with the same bytes.
    for rnd in ("prefill", "decode"):
        seqs = []
        for cls in out["rank_classes"]:
            seqs.append([(o["op"], o.get("boundary"), o["bytes"]) for o in cls["program"][rnd]
                         if o.get("family") == "replica"])
        assert all(s == seqs[0] for s in seqs), f"{rnd}: stages disagree on replica collectives"


def converged(out: dict) -> dict[str, bool]:
    return {s["name"]: s["converge"] for s in out["sites"]}


@SETTINGS
@given(specs())
def test_policy_semantics(data):
    _, out = planned(data)
    method = METHODS[out["speculative"]["method"]]
    policy = out["sync"]["policy"]
    engine = convention(out["engine"])
    for site in out["sites"]:
        natures = {d["nature"] for d in site["decisions"]}
        want = {"off": False, "all": True, "safe": bool(natures - {"deterministic"}),
                "rng": "rng" in method.site(site["name"]).presets,
                "init": "init" in method.site(site["name"]).presets}[policy]
        # A site the engine agrees itself (vLLM's start-up memory MIN) whatever the policy.
        want = want or engine.engine_held(method.site(site["name"])) is not None
        assert site["converge"] is want, (site["name"], policy)


@SETTINGS
@given(specs(), st.data())
def test_sync_sites_override_both_ways(data, draw):
    base = load(data)
    assume(base is not None)
    names = [s.name for s in METHODS[data["speculative"]["method"]].sites]
    name = draw.draw(st.sampled_from(names))
    for value in ("on", "off"):
        data["sync"]["sites"] = {name: value}
        _, out = planned(data)
        sites = converged(out)
        held = convention(data["engine"]).engine_held(METHODS[data["speculative"]["method"]].site(name))
        if name in sites:
            assert sites[name] is (value == "on" or held is not None)


def test_unknown_site_is_a_plan_error(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: bad\nengine: sglang\ntopology: {tp: 2}\n"
                    "model: {num_layers: 8, hidden_size: 64, vocab_size: 128}\n"
                    "speculative: {method: dspark, num_steps: 3}\n"
                    "sync:\n  policy: safe\n  sites:\n    eagle_accept: on\n")
    with pytest.raises(PlanError) as err:
        plan(load_spec(path))
    (diag,) = err.value.diagnostics
    assert str(diag).startswith(f"{path}:9:")
    assert "sync.sites.eagle_accept: unknown site 'eagle_accept' for method 'dspark'" in str(diag)


def test_unknown_site_exits_2_from_the_cli(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: bad\nengine: sglang\ntopology: {tp: 2}\n"
                    "model: {num_layers: 8, hidden_size: 64, vocab_size: 128}\n"
                    "speculative: {method: eagle, num_steps: 2}\n"
                    "sync:\n  sites:\n    nope: off\n")
    result = cli("compile", str(path), "-o", str(tmp_path / "out"))
    assert result.exit_code == 2
    assert f"{path}:8:" in result.output
    assert "sync.sites.nope: unknown site 'nope' for method 'eagle'; sites: " in result.output
