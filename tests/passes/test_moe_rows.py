"""moe_rows: rows split over attention TP only for sglang + DP-attention + attn_tp > 1 + deepep."""

from __future__ import annotations

import pytest

SPEC = """\
name: moe
engine: {engine}
topology: {topology}
model: {{num_layers: 8, hidden_size: 64, vocab_size: 128, moe: {{num_experts: 4, top_k: 2, a2a: {a2a}}}}}
speculative: {{method: mtp, num_steps: 3}}
runtime: {{max_batch: 4}}
"""


@pytest.mark.parametrize("engine, topology, a2a, split", [
    ("sglang", "{tp: 4, dp: 2, dp_attention: true}", "deepep", True),
    ("sglang", "{tp: 4, dp: 2, dp_attention: true}", "none", False),
    ("sglang", "{tp: 4, dp: 4, dp_attention: true}", "deepep", False),  # attn_tp 1
    ("sglang", "{tp: 4}", "deepep", False),
    ("vllm", "{tp: 2, dp: 2}", "deepep", False),
])
def test_row_split_rule(planned, engine, topology, a2a, split):
    p = planned(SPEC.format(engine=engine, topology=topology, a2a=a2a))
    assert p.draft.moe.row_split is split
    nodes = [n.name for n in p.graph.nodes("compute") if n.attr("compute") == "moe_dispatch_combine"]
    assert bool(nodes) is split


def test_split_rows_and_gather_bytes(planned):
    p = planned(SPEC.format(engine="sglang", topology="{tp: 4, dp: 2, dp_attention: true}", a2a="deepep"))
    moe = p.draft.moe
    rows = 4 * 4  # max_batch x verify width
    assert (moe.rows_per_rank, moe.gather_family, moe.dispatch_family) == (rows // 2, "attn_tp", "tp")
    assert moe.gather_bytes_per_layer == rows * 64 * 2


def test_dense_model_has_no_moe_section(planned):
    spec = SPEC.format(engine="sglang", topology="{tp: 2}", a2a="none").replace(
        ", moe: {num_experts: 4, top_k: 2, a2a: none}", "")
    assert planned(spec).draft.moe is None
