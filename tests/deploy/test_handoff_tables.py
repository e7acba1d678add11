"""Handoff tables: every pair of tests/deploy/pairs.py, grouped, against golden tables.

The golden tables are checked against the engines' own functions by test_handoff_engines.py
(marker `engines`); here they guard the planner without the wheels. Regenerate with
SPECPLAN_UPDATE_GOLDEN=1 and review the diff. NixlPushConnector has no function to call: its
table is derived by hand below from push_worker._xfer_blocks_for_req (the producer writes to
handshake_target_ranks of the consumer TP) and the consumer's notification count
(pp_size * max(1, producer TP // consumer world)).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from specplan.deploy.explain import group_handoff
from specplan.deploy.handoff import plan_handoff
from tests.deploy.pairs import (MOONCAKE_PP_PAIRS, SGLANG_DCP_PAIRS, SGLANG_PAIRS, VLLM_DCP_PAIRS,
                                VLLM_PAIRS, VLLM_PCP_PAIRS, deployment)

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("SPECPLAN_UPDATE_GOLDEN") == "1"
TABLES = {
    "sglang-mooncake": ("sglang", "mooncake", SGLANG_PAIRS + SGLANG_DCP_PAIRS),
    "vllm-nixl": ("vllm", "nixl", VLLM_PAIRS + VLLM_PCP_PAIRS + VLLM_DCP_PAIRS),
    "vllm-nixl_push": ("vllm", "nixl_push", VLLM_PAIRS + VLLM_PCP_PAIRS),
    "vllm-mooncake": ("vllm", "mooncake", VLLM_PAIRS + MOONCAKE_PP_PAIRS + VLLM_PCP_PAIRS),
}


def _table(engine: str, connector: str, pairs) -> list[dict]:
    out = []
    for prefill, decode, attention, kv_heads in pairs:
        h = plan_handoff(deployment(engine, prefill, decode, connector, attention=attention,
                                    kv_heads=kv_heads))
        rows = [{"decode_ranks": ranks, **entry} for ranks, entry in group_handoff(h.entries)]
        out.append({"prefill": prefill, "decode": decode, "attention": attention,
                    "num_kv_heads": kv_heads, "refused": [r.kind for r in h.refusals], "rows": rows})
    return out


@pytest.mark.parametrize("name", TABLES)
def test_handoff_table(name):
    table = _table(*TABLES[name])
    assert len(table) >= 20
    path = GOLDEN / f"{name}.json"
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(json.dumps(table, indent=1) + "\n")
    assert table == json.loads(path.read_text())


def _rows(engine, connector, prefill, decode, **model):
    h = plan_handoff(deployment(engine, prefill, decode, connector, **model))
    return {tuple(ranks): e for ranks, e in group_handoff(h.entries)}


def test_sglang_worked_example():
    """_resolve_rank_mapping, prefill attn_tp 2 x pp 2 -> decode attn_tp 4: decode TP rank r
    pulls prefill TP rank r // 2 on both stages (2 responses), 2 destinations per source."""
    rows = _rows("sglang", "mooncake", {"tp": 2, "pp": 2}, {"tp": 4}, layers=8)
    assert rows[(3,)] == {"prefill_dp_rank": 0, "prefill_tp_ranks": [1], "prefill_cp_ranks": [0],
                          "prefill_pp_ranks": [0, 1], "layers": [[0, 4], [4, 8], [8, 9]],
                          "head_offset": 6, "head_count": 2, "responses_expected": 2,
                          "consumers_per_source": 2}


def test_nixl_push_by_hand():
    """Producer TP 8 -> consumer TP 2: four producers write each consumer rank, which waits
    pp_size * 8 // 2 notifications; each producer writes one consumer rank."""
    rows = _rows("vllm", "nixl_push", {"tp": 8, "pp": 2}, {"tp": 2})
    assert [(e["prefill_tp_ranks"], e["responses_expected"], e["consumers_per_source"])
            for e in rows.values()] == [([0, 1, 2, 3], 8, 1), ([4, 5, 6, 7], 8, 1)]
    rows = _rows("vllm", "nixl_push", {"tp": 2}, {"tp": 8})
    assert [(r, e["prefill_tp_ranks"], e["responses_expected"], e["consumers_per_source"])
            for r, e in rows.items()] == [((d,), [d // 4], 1, 4) for d in range(8)]


def test_mooncake_decode_pp_reads_every_producer_stage():
    """receive_kv: PP sizes differ, so each consumer stage pulls every producer stage; names
    route the layers, so a stage keeps only its own; resolve_need_send counts 2 stages."""
    rows = _rows("vllm", "mooncake", {"tp": 2}, {"tp": 2, "pp": 2}, layers=12)
    assert rows[(0,)]["layers"] == [[0, 6]] and rows[(2,)]["layers"] == [[6, 12], [12, 13]]
    assert {e["consumers_per_source"] for e in rows.values()} == {2}
