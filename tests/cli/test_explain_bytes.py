"""`specplan explain`'s figures say what they are (issue 14 item 9 and its smaller things):
bytes per rank per round at runtime.max_batch beside the live rows at a typical batch, the
per-layer column counting the row movement each MoE layer really does, one-rank families
hidden unless asked for, sources named as ranks, vLLM's dp groups in rank order."""

from __future__ import annotations

from pathlib import Path

import pytest

from specplan import compile
from specplan.views.round_view import round_data, typical_batch
from specplan.schema import load_spec
from tests.helpers import cli

ROOT = Path(__file__).parents[2]
TEACHING = "specs/deepseek-v4-dspark-tp16-dp8.yaml"  # sglang, DP-attention, tensor-parallel MoE
EX4 = "tests/golden/explain/sglang-ex4-tp8-dp2-cp2-ep4-moedp2.yaml"
VLLM_DP = "tests/golden/explain/vllm-dp2-pp2-tp4-moe.yaml"


def rounds_of(path: str) -> dict:
    return round_data(compile(load_spec(ROOT / path)))


def table_rows(text: str, title: str) -> list[list[str]]:
    """The body rows of the table printed under `title`."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    rows = []
    for line in lines[start + 1:]:
        if line.startswith("└"):
            break
        if line.startswith("│"):
            rows.append([c.strip() for c in line.strip("│").split("│")])
    return rows


def test_typical_batch_is_a_quarter_of_max_batch():
    assert [typical_batch(n) for n in (1, 3, 4, 8, 256)] == [1, 1, 1, 2, 64]


@pytest.mark.parametrize("path, expected", [
    # sglang DP-attention, tensor-parallel MoE: every MoE layer gathers the DP ranks' rows over
    # tp and hands them back (reference/sglang.md §5.3, MoeTransport): with attn_tp 2 through
    # the MoE's all-reduce and a local copy; with one rank per DP shard and moe_ep = attn_dp,
    # a reduce-scatter
    (TEACHING, [("dp_gather", "all_gather", "tp"), ("dp_scatter", "all_reduce", "tp")]),
    ("specs/deepseek-v4-dspark-tp8-dp8.yaml",
     [("dp_gather", "all_gather", "tp"), ("dp_scatter", "reduce_scatter", "tp")]),
    # sglang DP-attention, DeepEP with attn_tp 2: dispatch and combine over tp, the attention-TP
    # row slices regathered over attn_tp
    ("tests/golden/plans/dflash-greedy-dpattn.yaml",
     [("moe_dispatch", "all_to_all", "tp"), ("moe_combine", "all_to_all", "tp"),
      ("moe_row_gather", "all_gather", "attn_tp")]),
    # sglang attention CP: the CP partners gather and reduce-scatter
    (EX4, [("cp_gather", "all_gather", "attn_cp"), ("cp_scatter", "reduce_scatter", "attn_cp")]),
    # vllm dp 2: MoERunner's naive dispatch and combine over the ep group
    (VLLM_DP, [("moe_dispatch", "all_gather", "ep"), ("moe_combine", "reduce_scatter", "ep")]),
    # vllm tp x pp, one DP rank: the experts see the attention layout's rows
    ("specs/kimi-k3-dspark-tp8-pp2.yaml", []),
])
def test_per_layer_counts_the_row_movement_of_each_moe_layer(path, expected):
    data = rounds_of(path)
    for cls in data["per_rank_class"]:
        for name in ("prefill", "decode"):
            r = cls["rounds"][name]
            got = [(c["what"], c["op"], c["family"]) for c in r["per_layer"]]
            assert got == expected, (cls["rule"], name)
            assert r["per_layer_collectives"] == len(expected)
        assert cls["rounds"]["startup"]["per_layer_collectives"] == 0  # no target forward


def test_live_rows_are_the_typical_batch_share_of_the_buffers():
    data = rounds_of("specs/llama-3.2-1b-eagle3-pp2.yaml")
    assert (data["max_batch"], data["typical_batch"]) == (64, 16)
    decode = data["per_rank_class"][0]["rounds"]["decode"]
    # stage handoffs dominate: a quarter of the rows is about a quarter of the bytes
    assert 0 < decode["live_bytes"] < decode["bytes"]
    assert abs(decode["live_bytes"] * 4 - decode["bytes"]) < decode["bytes"] * 0.05


def test_the_tables_name_max_batch_the_typical_batch_and_the_per_layer_column():
    out = cli("explain", TEACHING, code=0).stdout
    assert "collectives and bytes per rank per round at max_batch=256" in out
    assert "sites (decode round unless noted; bytes per rank at max_batch=256)" in out
    rows = table_rows(out, "collectives and bytes per rank per round")
    assert ["stage 0", "decode", "4", "42.5 KiB", "5.3 KiB", "2"] in rows
    assert "live rows: the bytes of the live rows at a typical batch of 64 (max_batch/4)" in out
    assert ("per-layer: collectives each MoE layer of the target issues per forward: dp_gather "
            "(all_gather over tp), dp_scatter (all_reduce over tp)") in out


def test_sources_are_named_as_ranks():
    out = cli("explain", TEACHING).stdout
    sites = {r[0]: r[3] for r in table_rows(out, "sites (")}
    # eight replicas (attn_tp pairs): member 0 of each is rank 0, 2, ..., 14
    assert sites["dspark_draft"] == "member 0 = ranks 0, 2, ..., 14"
    out = cli("explain", "specs/kimi-k3-dspark-tp8-pp2.yaml").stdout
    sites = {r[0]: r[3] for r in table_rows(out, "sites (")}
    # vllm tp8 x pp2: one replica of 16 ranks, sourced from the last stage's first rank
    assert sites["dspark_draft"] == "member 8 = rank 8"


def test_one_rank_families_are_hidden_unless_asked_for():
    out = cli("explain", EX4).stdout
    listed = [r[0] for r in table_rows(out, "group families")]
    assert listed == ["tp", "attn_cp", "attn_tp", "moe_dp", "moe_ep", "replica"]
    assert "families of one-rank groups, hidden: moe_tp, pp, dcp (--all-families shows them)" in out
    out = cli("explain", EX4, "--all-families").stdout
    listed = [r[0] for r in table_rows(out, "group families")]
    assert listed == ["tp", "attn_cp", "attn_tp", "moe_dp", "moe_ep", "moe_tp", "pp", "dcp", "replica"]
    assert "hidden" not in out


def test_vllm_dp_groups_are_listed_in_rank_order_and_kept_in_creation_order_in_json():
    import json

    out = cli("explain", VLLM_DP).stdout
    dp = next(r for r in table_rows(out, "group families") if r[0] == "dp")
    assert dp[3] == "[0,8] [1,9] [2,10] [3,11] [4,12] [5,13] [6,14] [7,15]"
    data = json.loads(cli("explain", VLLM_DP, "--json").stdout)
    assert data["groups"]["dp"][:2] == [[0, 8], [4, 12]]  # vLLM creates them pp column by column


def test_the_readme_shows_what_explain_prints():
    """Every line of the README's explain examples (`...` marks a cut) is a line the command
    prints, trailing spaces aside."""
    import re

    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```console\n\$ specplan explain (\S+)( --rank \d+)?\n(.*?)```", readme, re.S)
    assert len(blocks) >= 2
    for spec, rank, body in blocks:
        proc = cli("explain", spec, *(rank.split() if rank else ()))
        assert proc.returncode == 0, proc.stderr
        printed = {line.rstrip() for line in proc.stdout.splitlines()}
        missing = [line for line in body.splitlines() if line != "..." and line not in printed]
        assert not missing, (spec, rank, missing)


def test_check_buffer_findings_say_their_bytes_are_per_round_at_max_batch():
    import copy

    from specplan.plan import load_plan
    from specplan.verify import verify

    plan = compile(load_spec(ROOT / "specs/llama-3.2-1b-eagle3-pp2.yaml")).to_json()
    mutant = copy.deepcopy(plan)
    bound = next(b for b in mutant["boundaries"] if b["op"] == "broadcast")
    bound["buffer_bytes"] += 8
    found = [f.message for f in verify(load_plan(mutant, trusted=True)) if "buffer" in f.message]
    assert found and all("max_batch=64" in m for m in found), found
