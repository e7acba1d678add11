"""The SGLang plugin's `ngram_draft` site on SGLang 0.5.23's real
`NGRAMWorker._prepare_draft_tokens` (tests/engines/sglang_ngram_workers.py), gloo ranks, the
plugin loaded by SGLang's loader.

SGLang drafts NGRAM's tree on each TP rank from that rank's own host-side n-gram corpus and
converges nothing: ranks whose corpora differ (here an external corpus committed at another
round on each rank) verify different trees across the target's all-reduce. Through the plugin
every rank of a replica ends each round with its plan source's drafts and mask, in SGLang's own
numpy dtypes and shapes, from one guarded collective per round.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sglang_harness import forkserver
from test_sglang_draft import targets
from test_sglang_plugin import widths
from test_sglang_sites import SOURCES, TOPOLOGY, hold_their_sources, replicas_differ
from wheels import engine_root

from tests.helpers import compile_spec
from tests.ranks import launch

HERE = Path(__file__).resolve().parent


pytestmark = pytest.mark.engines

N = 4  # num_draft_tokens
ENGINE = dict(speculative_algorithm="NGRAM", speculative_num_steps=3, speculative_eagle_topk=1,
              speculative_num_draft_tokens=N)
DRAFT = ("draft_tokens", "tree_mask", "engine")


def plan(tmp: Path, topo: str) -> Path:
    return compile_spec(tmp / f"ngram-{topo}", f"""
name: ngram-{topo}
engine: sglang
topology: {TOPOLOGY[topo][0]}
model: {{num_layers: 8, hidden_size: 64, vocab_size: 1000}}
speculative: {{method: ngram, num_steps: 3, num_draft_tokens: {N}, sampling: sampling}}
sync: {{policy: all}}
runtime: {{max_batch: 8, timeout_s: 60}}
""")


def run(topo: str, tmp: Path | None, forge: str = "", width: str = "") -> list[dict]:
    env = {"SGLANG_USE_MESSAGE_QUEUE_BROADCASTER": "false", "TRITON_INTERPRET": "1",
           "SPECPLAN_PLAN": str(plan(tmp, topo)) if tmp else ""}
    root = engine_root("sglang")
    results = launch(len(SOURCES[topo]), "ngram_draft", str(root),
                     json.dumps(widths(**TOPOLOGY[topo][1])), json.dumps(ENGINE), forge, width,
                     module="sglang_ngram_workers", preload=forkserver(root), path=(HERE,),
                     env=env, timeout=600)
    for r in results:
        assert r.returncode == 0 and r.result is not None, (r.rank, r.stdout[-800:], r.stderr[-3000:])
    return [r.result for r in results]


def test_the_ngram_draft_is_hooked_only_for_an_ngram_plan(tmp_path):
    from specplan.plugins.sglang_draft import NGRAM_DRAFT

    assert targets(plan(tmp_path, "tp2")) == [NGRAM_DRAFT]  # and none of the EAGLE-family hooks
    eagle = compile_spec(tmp_path / "eagle", """
name: eagle
engine: sglang
topology: {tp: 2, device: cpu}
model: {num_layers: 8, hidden_size: 64, vocab_size: 1000}
speculative: {method: eagle, num_steps: 3, topk: 4, num_draft_tokens: 8, sampling: sampling}
""")
    assert NGRAM_DRAFT not in targets(eagle)


@pytest.mark.parametrize("topo", ["tp2", pytest.param("dpattn", marks=pytest.mark.slow)])
def test_ngram_draft_is_the_sources_through_the_plugin(tmp_path, topo):
    outs = run(topo, tmp_path)
    assert all(NGRAM_DRAFT_HOOK in out["hooks"] for out in outs)
    assert replicas_differ(outs, topo, DRAFT)
    hold_their_sources(outs, topo, DRAFT)  # drafts, mask, and SGLang's own dtypes and shapes
    for out in outs:  # SGLang broadcasts nothing here: the one collective is the plugin's
        assert [r["broadcasts"] for r in out["rounds"]] == [1, 1, 1]
        assert out["rounds"][0]["engine"] == ["int64", [4 * N], "int64", [4 * N * N]]


def test_arrays_of_another_width_than_the_plans_fall_back_to_plain_broadcasts(tmp_path):
    # The worker drafts 5 tokens per request where the plan says 4: the plugin broadcasts each
    # of the two arrays from the plan's source (no header), still the source's tree.
    outs = run("tp2", tmp_path, width="5")
    assert replicas_differ(outs, "tp2", DRAFT)
    hold_their_sources(outs, "tp2", DRAFT)
    for out in outs:
        assert [r["broadcasts"] for r in out["rounds"]] == [2, 2, 2]
        assert out["rounds"][0]["engine"] == ["int64", [4 * 5], "int64", [4 * 5 * 5]]


def test_ngram_draft_without_the_plugin_differs_across_tp_ranks():
    outs = run("tp2", None)
    assert all(r["broadcasts"] == 0 for out in outs for r in out["rounds"])
    with pytest.raises(AssertionError, match="rank 1 round 0"):
        hold_their_sources(outs, "tp2", DRAFT)


def test_a_forged_guard_header_is_caught(tmp_path):
    # Rank 1 claims round 5 at round 2: it receives its source's header for round 0 and raises.
    outs = run("tp2", tmp_path, forge="1:2")
    assert all("desync" not in r for r in outs[0]["rounds"] + outs[1]["rounds"][:2])
    err = outs[1]["rounds"][2]["desync"]
    assert "round" in err and "rank 1" in err, err


NGRAM_DRAFT_HOOK = "sglang.srt.speculative.ngram_worker.NGRAMWorker._prepare_draft_tokens"
