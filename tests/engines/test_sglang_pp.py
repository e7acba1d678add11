"""The SGLang plugin under pipeline parallelism, on SGLang 0.5.23's own PP relay
(tests/engines/sglang_pp_workers.py: the real scheduler_pp_mixin send / receive / processing,
eagle_sample and build_eagle_verify_input, gloo ranks, the plugin loaded by SGLang's loader).

SGLang sends the last stage's results split over attn_tp (each last-stage rank sends its share
of every tensor and the receiver gathers them), so when the last stage's ranks disagree an
earlier stage commits a mix of them. Through the plugin the last stage converges first, the
plan's relay rides SGLang's message, and every stage commits the source's values after
checking the relay's header and the rows it answers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sglang_harness import forkserver
from test_sglang_plugin import ok, widths
from wheels import engine_root

from tests.helpers import compile_spec
from tests.ranks import launch

HERE = Path(__file__).resolve().parent


pytestmark = pytest.mark.engines

ENGINE = dict(speculative_algorithm="EAGLE", speculative_num_steps=3, speculative_eagle_topk=1,
              speculative_num_draft_tokens=4, disable_overlap_schedule=True)


def plan(tmp: Path, tp: int, pp: int) -> Path:
    return compile_spec(tmp / f"tp{tp}pp{pp}", f"""
name: sg-pp-tp{tp}pp{pp}
engine: sglang
topology: {{tp: {tp}, pp: {pp}, device: cpu}}
model: {{num_layers: 8, hidden_size: 64, vocab_size: 1000}}
speculative: {{method: eagle, num_steps: 3, topk: 1, num_draft_tokens: 4, sampling: sampling}}
sync: {{policy: all}}
runtime: {{max_batch: 8, timeout_s: 60}}
""")


def run(tmp: Path | None, tp: int, pp: int, odd: str = "none", hot_path: str = "auto") -> list[dict]:
    env = {"SGLANG_USE_MESSAGE_QUEUE_BROADCASTER": "false", "TRITON_INTERPRET": "1",
           "TORCHDYNAMO_DISABLE": "1", "SPECPLAN_PLAN": str(plan(tmp, tp, pp)) if tmp else "",
           "SPECPLAN_HOT_PATH": hot_path}
    root = engine_root("sglang")
    return ok(launch(tp * pp, "pp_relay", str(root), json.dumps(widths(tp, pp)),
                     json.dumps(ENGINE), odd, module="sglang_pp_workers", preload=forkserver(root),
                     path=(HERE,), env=env, timeout=600))


def committed(results: list[dict]) -> list:
    return [[{k: c[k] for k in ("accept_lens", "bonus", "next_chain")} for c in r["commits"]] for r in results]


@pytest.mark.parametrize("tp, pp", [(2, 2), pytest.param(2, 3, marks=pytest.mark.slow),
                                    pytest.param(4, 2, marks=pytest.mark.slow)])
def test_every_stage_commits_the_last_stages_source_through_the_plugin(tmp_path, tp, pp):
    results = run(tmp_path, tp, pp)
    source = results[(pp - 1) * tp]  # the last stage's first rank: the plan's source
    assert source["stage"] == pp - 1 and len(source["sent"]) == 3
    assert all(f"specplan.{s}" in source["sent"][0]["keys"] for s in ("eagle_accept", "eagle_draft"))
    want = [{k: s[k] for k in ("accept_lens", "bonus", "next_chain")} for s in source["sent"]]
    for r, got in zip(results, committed(results)):
        assert got == want, (r["stage"], got, want)  # every rank of every stage: the source's
        if r["stage"] < pp - 1:
            assert r["checked"] == 6, r  # accept + draft relay checked per round
    # the last stage's ranks drew different accepts: without the converge they would differ
    assert len({r["sent"][0]["accept_lens"][0] for r in results[(pp - 1) * tp:]}) == 1


def test_without_the_plugin_every_stage_commits_a_mix_of_the_last_stages_ranks():
    """Each last-stage rank committed its own accept inside its verify; the output SGLang
    relays is gathered from both ranks' halves, which is what every stage's scheduler then
    records: tokens neither rank's verify accepted."""
    results = run(None, 2, 2)
    own = [r["sent"][0]["accept_lens"] for r in results[2:]]
    assert own[0] != own[1]
    half = len(own[0]) // 2  # SGLang splits each tensor over attn_tp
    mixed = own[0][:half] + own[1][half:]
    assert mixed not in own
    assert [c[0]["accept_lens"] for c in committed(results)] == [mixed] * 4


@pytest.mark.parametrize("hot_path", ["auto", "device"])
def test_a_row_handed_out_again_while_its_result_is_in_flight_is_a_batch_mismatch(tmp_path, hot_path):
    """Stage 0's row 1 gets another generation at round 1 before that round's result is
    processed: the plugin raises BatchMismatch naming the row before SGLang commits it (on the
    device path compared on the device and read by the hook's check_round, before the commit)."""
    results = run(tmp_path, 2, 2, "gen", hot_path)
    for rank, r in enumerate(results[:2]):
        assert [c["accept_lens"] for c in r["commits"]] == [results[2]["sent"][0]["accept_lens"]]
        err = r["errors"][0]
        assert err["round"] == 1 and err["error"].startswith(
            "BatchMismatch: batch mismatch at site eagle_accept (relay 65538), round 1: "
            f"row 1: rank {rank} holds request req-1 gen 1 where rank {rank + 2} (the source) "
            "holds request req-1 gen 0; the ranks of group pp disagree"), err
        assert err["error"].endswith("(compared on the device, read at check_round)") == (hot_path == "device")


def test_a_message_for_another_batch_kind_is_a_desync_before_any_commit(tmp_path):
    results = run(tmp_path, 2, 2, "kind")
    for r in results[:2]:
        assert len(r["commits"]) == 1, r["commits"]  # round 0 only
        err = r["errors"][0]
        assert err["round"] == 1 and err["error"].startswith(
            "DesyncError: PP relay of eagle_accept at round 1: rank"), err
        assert "an extend batch of 4 rows" in err["error"] and "carries an accept relay" in err["error"], err
