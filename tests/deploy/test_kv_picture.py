"""`specplan explain DEPLOYMENT --picture kv`: both grids and one arrow per planned pull."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.helpers import cli


ROOT = Path(__file__).resolve().parents[2]
PAIR = "specs/disagg/llama-eagle-prefill-tp2-pp2.yaml"
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(autouse=True)
def _at_root(monkeypatch):
    monkeypatch.chdir(ROOT)


def _draw(tmp_path: Path, fmt: str, target: str = PAIR):
    out = tmp_path / f"kv.{fmt}"
    res = cli("explain", target, "--picture", "kv", "--format", fmt,
              "-o", str(out), catch=False)
    return res, out


def test_svg_has_every_rank_and_every_pull(tmp_path):
    res, out = _draw(tmp_path, "svg")
    assert res.exit_code == 0, res.stderr
    root = ET.parse(out).getroot()
    arrows = [p for p in root.iter(f"{SVG}path") if p.get("marker-end")]
    tips = sorted(p.find(f"{SVG}title").text for p in arrows)
    # decode rank d (dp d // 2, attn tp d % 2) pulls prefill TP rank d % 2 on both stages
    want = sorted(f"p{tp + 2 * pp} -> d{d}: stage {pp}, layers [{8 * pp}, {8 * pp + 8})"
                  for d in range(4) for pp in (0, 1) for tp in (d % 2,))
    assert tips == want
    labels = {t.text for t in root.iter(f"{SVG}tspan")}
    assert {"p0", "p3", "d0", "d3"} <= labels


def test_text_forms_link_the_same_pairs(tmp_path):
    mermaid = _draw(tmp_path, "mermaid")[1].read_text()
    dot = _draw(tmp_path, "dot")[1].read_text()
    assert mermaid.count('-->|"stage') == 8 and 'p3 -->|"stage 1"| d1' in mermaid
    assert dot.count(" -> d") == 8 and "p2 -> d0" in dot


def test_kv_needs_a_deployment(tmp_path):
    res, out = _draw(tmp_path, "svg", "specs/kimi-k3-dspark-tp8-pp2.yaml")
    assert res.exit_code == 2 and not out.exists()
    assert "--picture kv draws a deployment's KV handoff" in res.stderr
