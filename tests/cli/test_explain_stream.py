"""`explain --json` streamed: byte for byte today's JSON, made a block of ranks at a time.

Today's reading (explain_data with plain lists, dumped by json.dumps) is the reference; the
streamed writer over lazy listings must print the same bytes for every example and golden
spec, also with blocks of a few ranks (so every block boundary and axis split is crossed on
small worlds), and one rank's view, the tables and every listing must read the same.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from specplan.views import explain_stream
from specplan.views.explain import explain_data, rank_data, render
from specplan.lower import build_plan
from specplan.passes import plan as run_passes
from specplan.views.round_view import render_round, round_data
from specplan.schema import load_spec
from tests.helpers import cli

ROOT = Path(__file__).parents[2]
SPECS = sorted([*ROOT.glob("tests/golden/explain/*.yaml"), *ROOT.glob("specs/*.yaml")])
IDS = [p.stem for p in SPECS]


def both(path: Path) -> tuple[dict, dict]:
    """(today's data, the lazy data) of one spec, each with its round."""
    spec = load_spec(path)
    planning = run_passes(spec)
    built = build_plan(planning)
    eager, lazy = explain_data(spec, planning.mesh), explain_data(spec, planning.mesh, lazy=True)
    eager["round"], lazy["round"] = round_data(built), round_data(built, lazy=True)
    return eager, lazy


def streamed(data: dict) -> str:
    out = io.StringIO()
    explain_stream.write_json(data, out.write)
    return out.getvalue()


@pytest.mark.parametrize("path", SPECS, ids=IDS)
@pytest.mark.parametrize("block", [explain_stream.BLOCK, 8, 3, 1])
def test_streamed_json_is_todays_json(path, block, monkeypatch):
    monkeypatch.setattr(explain_stream, "BLOCK", block)
    eager, lazy = both(path)
    assert streamed(lazy) == json.dumps(eager, separators=(",", ":"))


@pytest.mark.parametrize("path", SPECS, ids=IDS)
def test_listings_read_as_the_lists(path):
    eager, lazy = both(path)
    for key in ("ranks", "replicas"):
        assert list(lazy[key]) == eager[key] and len(lazy[key]) == len(eager[key])
        assert lazy[key][-1] == eager[key][-1] and lazy[key][1:5] == eager[key][1:5]
        with pytest.raises(IndexError):
            lazy[key][len(eager[key])]
    for site, lazy_site in zip(eager["round"]["sites"], lazy["round"]["sites"]):
        assert list(lazy_site["source_ranks"]) == site["source_ranks"]
    for name, groups in eager["groups"].items():
        assert list(lazy["groups"][name]) == groups
        assert lazy["groups"][name].smallest(8) == sorted(groups)[:8]


@pytest.mark.parametrize("path", SPECS, ids=IDS)
def test_one_rank_and_the_tables_read_the_same(path):
    eager, lazy = both(path)
    pipeline = build_plan(run_passes(load_spec(path))).pipeline
    for rank in range(eager["world_size"]):
        assert rank_data(lazy, rank) == rank_data(eager, rank)
    for rank, every in ((None, False), (None, True), (eager["world_size"] - 1, True)):
        shown = []
        for data in (eager, lazy):
            out = io.StringIO()
            con = Console(file=out, width=200, highlight=False)
            render(data, con, rank, every)
            if rank is None:
                render_round(data["round"], con, pipeline)
            shown.append(out.getvalue())
        assert shown[0] == shown[1]


def test_the_cli_streams_the_golden_json():
    path = "tests/golden/explain/vllm-dp2-pp2-tp4-moe.yaml"
    proc = cli("explain", path, "--json", process=True)
    assert proc.returncode == 0, proc.stderr
    eager, _ = both(ROOT / path)
    assert proc.stdout == json.dumps(eager, separators=(",", ":")) + "\n"


def test_a_block_is_the_largest_divisor_whose_axes_fit(monkeypatch):
    # tp 8 x pp 8 x dp 16384 (vLLM): every axis is a power of two, so BLOCK itself fits
    assert explain_stream._block(1 << 20, [(8, 1, 1), (8, 8, 1), (16384, 64, 1)]) == explain_stream.BLOCK
    monkeypatch.setattr(explain_stream, "BLOCK", 5)
    # 12 ranks as 2 x 3 (stride 2): 4 cuts the runs of the stride-2 axis, 3 those of the
    # stride-1 axis; 2 holds one whole run of each
    assert explain_stream._block(12, [(2, 1, 1), (3, 2, 1)]) == 2
