"""dp_agreement: the per-round token-count exchange, only where replicas share collectives."""

from __future__ import annotations

import pytest

from specplan.ir.records import Op

BASE = """\
name: dp
engine: {engine}
topology: {topology}
model: {{num_layers: 8, hidden_size: 64, vocab_size: 128{moe}}}
speculative: {{method: eagle, num_steps: 2}}
runtime: {{max_batch: 4}}
"""
MOE = ", moe: {num_experts: 4, top_k: 2}"


@pytest.mark.parametrize("engine, topology, moe, family", [
    ("sglang", "{tp: 4, dp: 2, dp_attention: true}", "", "tp"),
    ("sglang", "{tp: 4, dp: 2}", "", None),
    ("sglang", "{tp: 4}", MOE, None),
    ("vllm", "{tp: 2, dp: 2}", MOE, "dp"),
    ("vllm", "{tp: 2, dp: 2}", "", None),
])
def test_present_only_when_replicas_share_collectives(planned, engine, topology, moe, family):
    dp = planned(BASE.format(engine=engine, topology=topology, moe=moe)).draft.dp_agreement
    assert (dp and dp.family) == family


def test_sglang_gathers_counts_before_the_first_forward(planned):
    p = planned(BASE.format(engine="sglang", topology="{tp: 4, dp: 2, dp_attention: true}", moe=""))
    dp = p.draft.dp_agreement
    assert (dp.op, dp.ints_per_rank, dp.bytes) == ("all_gather", 7, 4 * 7 * 4)
    decode = p.draft.rank_classes[0].program.decode
    assert decode[0] == Op(op="all_gather", family="tp", bytes=112, what="dp_token_counts")
