"""`specplan explain`: the text tables (golden), --rank, exit codes, and no torch import."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

from rich.console import Console

from specplan.views.explain import explain_data, render
from specplan.engines import build_mesh
from specplan.schema import load_spec
from tests.helpers import cli

ROOT = Path(__file__).parents[2]
GOLDEN = ROOT / "tests" / "golden" / "explain"
EX4 = "tests/golden/explain/sglang-ex4-tp8-dp2-cp2-ep4-moedp2.yaml"
UPDATE = os.environ.get("SPECPLAN_UPDATE_GOLDEN") == "1"


def rendered(path: str, rank: int | None = None) -> str:
    spec = load_spec(ROOT / path)
    out = io.StringIO()
    render(explain_data(spec, build_mesh(spec)), Console(file=out, width=200, highlight=False), rank)
    return out.getvalue()


def test_text_tables_match_golden():
    """The mesh tables as `specplan explain` prints them off a terminal (200 columns)."""
    got = rendered(EX4)
    golden = GOLDEN / "sglang-ex4-tp8-dp2-cp2-ep4-moedp2.txt"
    if UPDATE:
        golden.write_text(got)
    assert got == golden.read_text()


def test_cli_prints_the_same_tables():
    proc = cli("explain", EX4)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(rendered(EX4))


def test_rank_view_lists_every_group_of_the_rank():
    text = rendered(EX4, rank=6)
    assert text.startswith("rank 6 of 8: node 0, local rank 6\n")
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:4]]
            for line in text.splitlines() if line.startswith("│")}
    # reference/sglang.md §1.4 Ex4: tp_rank 6 has attn_dp=1, attn_cp=1, attn_tp=0, moe_dp=1, moe_ep=2
    assert rows["attn_cp"] == ["1", "[4,6]"]
    assert rows["attn_tp"] == ["0", "[6,7]"]
    assert rows["moe_dp"] == ["1", "[2,6]"]
    assert rows["moe_ep"] == ["2", "[4-7]"]
    assert "replica 1 (takes decisions from rank 4)" in text


def test_rank_view_through_the_cli():
    proc = cli("explain", EX4, "--rank", "4")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("rank 4 of 8")
    assert "replica 1 (source)" in proc.stdout


def test_rank_out_of_range_is_a_user_error():
    for rank in ("8", "-1"):
        proc = cli("explain", EX4, "--rank", rank)
        assert proc.returncode == 2
        assert proc.stderr == f"{EX4}: --rank {rank} is outside the world: expected 0 .. 7\n"
        assert proc.stdout == ""


def test_json_is_one_object_with_the_stable_keys():
    proc = cli("explain", "tests/golden/explain/vllm-tp4-pcp2-dcp2.yaml", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    for key in ("world_size", "num_worlds", "engine", "widths", "groups", "ranks", "replicas", "stages"):
        assert key in data
    assert data["groups"]["dcp"] == [[0, 4], [1, 5], [2, 6], [3, 7]]


def test_explain_does_not_import_torch():
    code = (
        "import sys\n"
        "from specplan.cli import main\n"
        f"main(['explain', {EX4!r}, '--json'], standalone_mode=False)\n"
        f"main(['explain', {EX4!r}], standalone_mode=False)\n"
        "assert 'torch' not in sys.modules, 'explain imported torch'\n"
        "assert 'triton' not in sys.modules, 'explain imported triton'\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
