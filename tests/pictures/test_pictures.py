"""Every picture kind and format for every spec in specs/: well-formed, and carrying the
labels the mesh and the plan say it must (rank coordinates, stage lanes, converge groups and
bytes)."""

from __future__ import annotations

import functools
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from specplan.views.explain import explain_data
from specplan.lower import build_plan
from specplan.passes import plan as run_passes
from specplan.pictures import render_picture
from specplan.pictures import ranks as ranks_pic
from specplan.pictures.round import MAX_WIDTH, RoundPicture, converge_site
from specplan.pictures.svg import PALETTE
from specplan.schema import load_spec

ROOT = Path(__file__).resolve().parents[2]
SPECS = sorted((ROOT / "specs").glob("*.yaml"))
SVG = "{http://www.w3.org/2000/svg}"


@functools.lru_cache(maxsize=None)
def planned(path: Path):
    spec = load_spec(str(path))
    planning = run_passes(spec)
    return explain_data(spec, planning.mesh), planning, build_plan(planning)


def svg_texts(svg: str) -> tuple[ET.Element, list[str]]:
    root = ET.fromstring(svg.encode())
    lines = [t.text or "" for t in root.iter(f"{SVG}tspan")]
    return root, lines


def by_class(root: ET.Element, cls: str) -> list[ET.Element]:
    return [e for e in root.iter() if e.get("class") == cls]


def test_specs_exist():
    assert len(SPECS) >= 5


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_ranks_svg_labels_every_rank_with_its_replica_colour(path):
    data, planning, plan = planned(path)
    root, lines = svg_texts(render_picture("ranks", "svg", data, planning, plan))
    axes = ranks_pic.shown_axes(data)
    cells = by_class(root, "rank")
    assert len(cells) == min(data["world_size"], ranks_pic.MAX_RANKS)
    for row, cell in zip(data["ranks"], cells):
        for line in ranks_pic.rank_label(row, axes):
            assert line in lines, (row["rank"], line)
        assert cell.get("fill") == PALETTE[row["replica"] % len(PALETTE)]
    for node in {row["node"] for row in data["ranks"]}:
        assert f"node {node}" in lines


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_ranks_svg_outlines_every_group_of_the_default_family(path):
    data, planning, plan = planned(path)
    family = ranks_pic.default_family(data)
    root, lines = svg_texts(render_picture("ranks", "svg", data, planning, plan))
    outlines = by_class(root, "group")
    named = {e.find(f"{SVG}title").text.split(":")[0] for e in outlines}
    assert named == {f"{family} g{i}" for i in range(len(data["groups"][family]))}
    assert any(f"outline: {family} groups" in line for line in lines)


def test_ranks_family_option_outlines_that_family():
    data, planning, plan = planned(ROOT / "specs" / "deepseek-v4-dspark-tp16-dp8.yaml")
    assert ranks_pic.default_family(data) == "attn_tp"
    root, _ = svg_texts(render_picture("ranks", "svg", data, planning, plan, family="tp"))
    titles = [e.find(f"{SVG}title").text for e in by_class(root, "group")]
    # tp is one group of 16 over two nodes: one outline per node, both naming tp g0
    assert titles == [f"tp g0: ranks {list(range(16))}"] * 2


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_round_svg_has_every_lane_node_and_converge_label(path):
    data, planning, plan = planned(path)
    root, lines = svg_texts(render_picture("round", "svg", data, planning, plan))
    pic = RoundPicture(planning.graph, plan)
    pp = len(plan["pipeline"]["stages"])
    lanes = [e.text or "".join(t.text for t in e) for e in by_class(root, "lane-label")]
    assert lanes == [f"stage {s}" for s in range(pp)] * len(pic.rounds)
    for node in planning.graph.nodes():
        assert pic.labels[node.id][0] in lines, node.id
        assert node.kind == "commit" or node.name in lines, node.id
    converges = planning.graph.nodes(kind="converge")
    assert converges
    for node in converges:
        site = converge_site(node, plan)
        assert site is not None, node.id
        assert f"group {site.family}" in lines
        assert any(line.startswith(f"{site.bytes} B") for line in lines)
    assert len(by_class(root, "edge-handoff")) == sum(
        1 for _, _, d in planning.graph.edges() if d["kind"] == "pp_handoff")


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_round_svg_wraps_lanes_within_its_width(path):
    """However deep the round, the picture stays MAX_WIDTH wide: its columns wrap onto rows of
    lanes labelled "stage S, cont.", and every node lies inside the picture."""
    data, planning, plan = planned(path)
    root, _ = svg_texts(render_picture("round", "svg", data, planning, plan))
    width = float(root.get("width"))
    assert width <= MAX_WIDTH
    nodes = [e for e in root.iter() if (e.get("class") or "").startswith("node-") and e.get("width")]
    assert nodes and all(float(e.get("x")) + float(e.get("width")) <= width for e in nodes)
    conts = [e.text or "".join(t.text for t in e) for e in by_class(root, "lane-cont")]
    assert all(c.startswith("stage ") and c.endswith(", cont.") for c in conts)
    if path.stem == "llama-3.2-1b-eagle3-pp1":  # one stage, 14 columns deep: 5,136 px unwrapped
        assert len(conts) >= 3


def test_round_labels_read_as_english():
    data, planning, plan = planned(ROOT / "specs" / "llama-3.2-1b-eagle3-pp1.yaml")
    pic = RoundPicture(planning.graph, plan)
    labels = {n.id: pic.labels[n.id] for n in planning.graph.nodes()}
    flat = [line for v in labels.values() for line in v]
    assert "draft_forward x (num_steps - 1)" in flat
    assert "target_verify x 1" in flat
    assert "float int64 [bs x (num_draft_tokens - 1)]" in flat
    assert not [line for line in flat if "commit_commit" in line or " xnum" in line]
    commits = [v for n, v in labels.items() if n.startswith("commit:")]
    assert ["commit"] in commits and ["commit", "after draft_extend"] in commits
    data, planning, plan = planned(ROOT / "specs" / "deepseek-v4-dspark-tp16-dp8.yaml")
    pic = RoundPicture(planning.graph, plan)
    derives = {n.attr("name") or n.name: pic.labels[n.id][1] for n in planning.graph.nodes(kind="materialize")}
    assert "derives 1 value" in derives.values()
    assert not [d for d in derives.values() if d == "derives 1 values"]


def test_round_converge_labels_name_group_source_rank_and_bytes():
    data, planning, plan = planned(ROOT / "specs" / "kimi-k3-dspark-tp8-pp2.yaml")
    pic = RoundPicture(planning.graph, plan)
    # vllm tp8 x pp2: the replica is all 16 ranks; its source is the last stage's first rank
    assert pic.labels["converge:decode.dspark_draft@0"] == ["dspark_draft", "group replica",
                                                            "src rank 8", "14336 B"]
    taps = [e for e in pic.edges if e.style == "tap"]
    assert taps and all("taps 2" in e.label for e in taps)


@pytest.mark.parametrize("fmt", ["mermaid", "dot"])
@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_text_formats_carry_the_same_labels(path, fmt):
    data, planning, plan = planned(path)
    ranks_text = render_picture("ranks", fmt, data, planning, plan)
    axes = ranks_pic.shown_axes(data)
    for row in ranks_pic.drawn_ranks(data):
        for line in ranks_pic.rank_label(row, axes):
            assert line in ranks_text
    round_text = render_picture("round", fmt, data, planning, plan)
    pic = RoundPicture(planning.graph, plan)
    for label in pic.labels.values():
        for line in label:
            assert line.replace('"', "'") in round_text
    first = {"mermaid": "flowchart", "dot": "digraph"}[fmt]
    assert ranks_text.startswith(first) and round_text.startswith(first)
    if fmt == "dot":
        assert round_text.count("{") == round_text.count("}")


def test_pictures_are_deterministic():
    data, planning, plan = planned(ROOT / "specs" / "qwen3-32b-eagle3-dp2-pp2-cp2.yaml")
    for kind in ("ranks", "round"):
        assert render_picture(kind, "svg", data, planning, plan) == \
            render_picture(kind, "svg", data, planning, plan)


def test_big_worlds_are_capped(tmp_path):
    spec = tmp_path / "big.yaml"
    spec.write_text("name: big\nengine: sglang\ntopology: {tp: 64, pp: 8, nodes: 64}\n"
                    "model: {num_layers: 64, hidden_size: 1024, vocab_size: 32000}\n")
    data, planning, plan = planned(spec)
    assert data["world_size"] == 512
    root, lines = svg_texts(render_picture("ranks", "svg", data, planning, plan))
    assert len(by_class(root, "rank")) == ranks_pic.MAX_RANKS
    assert any(line.startswith("... 256 more ranks") for line in lines)
    assert "... 256 more ranks" in render_picture("ranks", "mermaid", data, planning, plan)


def test_docs_pictures_are_current():
    """docs/*.svg are the command's output for their spec (regenerate with the README lines)."""
    for kind, name in (("ranks", "deepseek-v4-dspark-tp16-dp8"), ("round", "kimi-k3-dspark-tp8-pp2")):
        data, planning, plan = planned(ROOT / "specs" / f"{name}.yaml")
        committed = (ROOT / "docs" / f"{kind}-{name}.svg").read_text(encoding="utf-8")
        assert committed == render_picture(kind, "svg", data, planning, plan), \
            f"docs/{kind}-{name}.svg is stale: specplan explain specs/{name}.yaml --picture {kind} -o docs/{kind}-{name}.svg"
