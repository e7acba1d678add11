"""The SGLang plugin agrees DSpark's start-up memory gate over the draft's graph group (issue 34
item 5), on SGLang 0.5.23's real SpecTpSync.available_memory_gb and get_available_gpu_memory,
gloo ranks, the plugin loaded by SGLang's loader (tests/engines/sglang_gate_workers.py).

tp 2, dp 2 with DP-attention and a MoE draft: SpecTpSync is built on get_dp_tp_group(), one
rank here, so it drops DSPARK_MEM and each rank keeps its own reading (40 + rank GiB), while
the draft's graph capture runs over the whole TP group. Through the plugin, every rank reads
the MIN over the plan's dspark_mem family, which specplan widens to tp.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sglang_harness import forkserver
from test_sglang_plugin import widths
from wheels import engine_root

from tests.helpers import compile_spec
from tests.ranks import launch

HERE = Path(__file__).resolve().parent

pytestmark = pytest.mark.engines

SPEC = """
name: sglang-dspark-mem
engine: sglang
topology: {tp: 2, dp: 2, dp_attention: true, dp_lm_head: true, device: cuda, backend: gloo}
model: {num_layers: 8, hidden_size: 64, vocab_size: 1000, moe: {num_experts: 4, top_k: 2}}
speculative: {method: dspark, num_steps: 3, sampling: greedy, aux_layers: [1, 3, 5]}
runtime: {max_batch: 8, timeout_s: 60}
"""
ENGINE = dict(speculative_algorithm="DSPARK", speculative_num_steps=3, speculative_eagle_topk=1,
              speculative_num_draft_tokens=4)


def _run(plan: Path | None) -> list[dict]:
    env = {"SGLANG_USE_MESSAGE_QUEUE_BROADCASTER": "false", "TRITON_INTERPRET": "1",
           "SPECPLAN_PLAN": str(plan or "")}
    root = engine_root("sglang")
    results = launch(2, "memory", str(root), json.dumps(widths(tp=2, dp=2)), json.dumps(ENGINE),
                     module="sglang_gate_workers", preload=forkserver(root), path=(HERE,), env=env,
                     timeout=600)
    for r in results:
        assert r.returncode == 0 and r.result is not None, (r.rank, r.stdout[-800:], r.stderr[-3000:])
    return [r.result for r in results]


def test_dspark_memory_minimum_over_the_draft_graph_group(tmp_path):
    plan = compile_spec(tmp_path / "plan", SPEC)
    site = next(s for s in json.loads(plan.read_text())["sites"] if s["name"] == "dspark_mem")
    assert site["family"] == "tp" and site["converge"]
    alone = _run(None)
    assert [o["sync_group"] for o in alone] == [[0], [1]]  # attention TP: one rank each
    assert [o["memory"] for o in alone] == [40.0, 41.0]  # SGLang alone: each rank decides alone
    through = _run(plan)
    assert all(any(h.endswith("SpecTpSync.available_memory_gb") for h in o["hooks"]) for o in through)
    assert [o["memory"] for o in through] == [40.0, 40.0]  # the MIN over tp [0, 1]
