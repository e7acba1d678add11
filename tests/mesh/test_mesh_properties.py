"""Rank math swept over thousands of random valid topologies (hypothesis).

Each family partitions the world; rank -> (group, group rank) -> rank round-trips by the
family rule alone; group sizes equal the widths (except the replica family and aliases of
a wider group); replicas contain the groups that serve one request; sglang and vllm agree
where their conventions coincide.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specplan.engines import build_mesh
from specplan.mesh import Mesh
from specplan.schema.checks import cross_checks
from specplan.schema.model import Spec
from specplan.schema.yaml_source import YamlSource

FAST = settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MOE = {"num_experts": 64, "top_k": 2}


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


@st.composite
def sglang_specs(draw) -> dict:
    dp_attention = draw(st.booleans())
    attn_dp = draw(st.integers(1, 4)) if dp_attention else 1
    cp, attn_tp = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    tp = attn_dp * cp * attn_tp
    # SGLang 0.5.23 allows moe_dp > 1 only as wide as attn_cp, with pp 1 and ep 1 or tp / moe_dp
    moe_dp = draw(st.sampled_from([1, cp]))
    pp = 1 if moe_dp > 1 else draw(st.integers(1, 4))
    ep = draw(st.sampled_from([1, tp // moe_dp] if moe_dp > 1 else divisors(tp)))
    topo = {"tp": tp, "pp": pp, "dp_attention": dp_attention,
            "dp": attn_dp if dp_attention else draw(st.integers(1, 3)), "cp": cp, "ep": ep,
            "moe_dp": moe_dp, "dcp": draw(st.sampled_from(divisors(tp))),
            "device": draw(st.sampled_from(["cuda", "npu"]))}
    return _spec("sglang", topo, draw, moe=ep > 1 or moe_dp > 1 or draw(st.booleans()))


@st.composite
def vllm_specs(draw) -> dict:
    tp, cp = draw(st.integers(1, 8)), draw(st.integers(1, 4))
    dcps = divisors(tp) if cp == 1 else sorted({1, cp, tp * cp})
    topo = {"tp": tp, "pp": draw(st.integers(1, 4)), "dp": draw(st.integers(1, 4)), "cp": cp,
            "dcp": draw(st.sampled_from(dcps))}
    moe = draw(st.booleans())
    if moe and draw(st.booleans()):
        topo["ep"] = topo["dp"] * cp * tp
    return _spec("vllm", topo, draw, moe=moe)


def _spec(engine: str, topo: dict, draw, moe: bool) -> dict:
    pp = topo["pp"]
    layers = draw(st.integers(max(pp, 3), 96))
    model = {"num_layers": layers, "hidden_size": 64, "vocab_size": 1000}
    if moe:
        model["moe"] = {**MOE, "num_experts": 64 * topo.get("ep", 1)}
    if draw(st.booleans()):
        cuts = sorted(draw(st.sets(st.integers(1, layers - 1), min_size=pp - 1, max_size=pp - 1)))
        bounds = [0, *cuts, layers]
        model["pp_partition"] = [b - a for a, b in zip(bounds, bounds[1:])]
    # SGLang never captures tap num_layers (engines/sglang/convention.py _tap_rules refuses it)
    last_tap = layers - 1 if engine == "sglang" else layers
    taps = draw(st.sets(st.integers(0, last_tap), min_size=1, max_size=4))
    spec = {"name": "prop", "engine": engine, "topology": topo, "model": model,
            "speculative": {"method": "eagle3", "num_steps": 3, "aux_layers": sorted(taps)}}
    return spec


def mesh_of(data: dict) -> tuple[Spec, Mesh]:
    spec = Spec.model_validate(data)
    assert cross_checks(spec, YamlSource("<prop>", data)) == [], data
    return spec, build_mesh(spec)


def expected_size(mesh: Mesh, name: str) -> int:
    w, d = mesh.widths, mesh.derived
    if mesh.engine == "vllm":
        return {"tp": w["tp"], "dcp": w["dcp"], "pcp": w["cp"], "pp": w["pp"], "dp": w["dp"],
                "ep": w["dp"] * w["cp"] * w["tp"]}[name]
    return {"tp": w["tp"], "pp": w["pp"], "dcp": w["dcp"], "attn_cp": d["attn_cp"], "attn_tp": d["attn_tp"],
            "moe_dp": d["moe_dp"], "moe_ep": d["moe_ep"], "moe_tp": d["moe_tp"]}[name]


def check_mesh(spec: Spec, mesh: Mesh) -> None:
    world = mesh.world_size
    coords = mesh.coords
    for fam in mesh.families:
        groups = fam.groups()
        assert sorted(r for g in groups for r in g) == list(range(world)), fam
        assert len(groups) == fam.num_groups and {len(g) for g in groups} == {fam.group_size}
        for index, group in enumerate(groups):
            for group_rank, rank in enumerate(group):
                assert fam.locate(rank) == (index, group_rank)
                assert fam.rank_at(index, group_rank) == rank
        if fam.name == "replica":
            continue
        assert coords[fam.name] == [fam.locate(r)[1] for r in range(world)]
        if fam.alias:
            assert groups == mesh.family(fam.alias).groups()
            assert fam.group_size >= expected_size(mesh, fam.name)
        else:
            assert fam.group_size == expected_size(mesh, fam.name), fam.name
    check_replicas(spec, mesh)
    check_stages(spec, mesh)


def check_replicas(spec: Spec, mesh: Mesh) -> None:
    pp = mesh.widths["pp"]
    reps = mesh.replicas
    assert sorted(r for rep in reps for r in rep.ranks) == list(range(mesh.world_size))
    # SGLang's dcp chunks the TP group and may span attention-DP replicas; vLLM's stays in one.
    inner = ("tp", "pcp", "pp", "dcp") if mesh.engine == "vllm" else ("attn_tp", "attn_cp", "pp")
    for rep in reps:
        last = [r for r in rep.ranks if mesh.stage_of(r) == pp - 1]
        assert rep.source == min(last) and len(last) * pp == len(rep.ranks)
        assert {mesh.replica_of[r] for r in rep.ranks} == {rep.index}
    for name in inner:
        for group in mesh.family(name).groups():
            assert len({mesh.replica_of[r] for r in group}) == 1, (name, group)


def check_stages(spec: Spec, mesh: Mesh) -> None:
    stages = mesh.stages
    assert [s.pp_rank for s in stages] == list(range(mesh.widths["pp"]))
    assert stages[0].start_layer == 0 and stages[-1].end_layer == spec.model.num_layers
    assert all(a.end_layer == b.start_layer for a, b in zip(stages, stages[1:]))
    assert all(s.end_layer > s.start_layer for s in stages)
    owned = [t for s in stages for t in s.taps]
    assert owned == sorted(spec.speculative.taps(spec.model.num_layers))
    for s in stages:
        assert all(s.start_layer < t <= s.end_layer or (t == 0 and s.pp_rank == 0) for t in s.taps)


@FAST
@given(sglang_specs())
def test_sglang_mesh_properties(data):
    check_mesh(*mesh_of(data))


@FAST
@given(vllm_specs())
def test_vllm_mesh_properties(data):
    check_mesh(*mesh_of(data))


@settings(max_examples=500, deadline=None)
@given(tp=st.integers(1, 16), pp=st.integers(1, 8), layers=st.integers(8, 128))
def test_engines_agree_where_conventions_coincide(tp, pp, layers):
    """dp=1, cp=1: both lay ranks out as pp-major, tp-fastest, so tp, pp and replicas agree."""
    meshes = {}
    for engine in ("sglang", "vllm"):
        data = {"name": "agree", "engine": engine, "topology": {"tp": tp, "pp": pp},
                "model": {"num_layers": layers, "hidden_size": 64, "vocab_size": 1000}}
        meshes[engine] = mesh_of(data)[1]
    sg, vl = meshes["sglang"], meshes["vllm"]
    assert sg.world_size == vl.world_size == tp * pp
    for name in ("tp", "pp"):
        assert sg.family(name).groups() == vl.family(name).groups()
        assert sg.coords[name] == vl.coords[name]
    assert sg.replicas == vl.replicas
