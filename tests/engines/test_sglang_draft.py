"""The SGLang plugin's EAGLE-family sites SGLang never converges (`<method>_target`,
`<method>_draft`, `<method>_draft_extend`) on SGLang 0.5.23's real functions
(tests/engines/sglang_draft_workers.py), gloo ranks, the plugin loaded by SGLang's loader.

SGLang converges none of them: TP ranks whose coins or draft logits differ commit different
first tokens, or verify different trees, so the target's verify forward mixes different
inputs across its all-reduce. Through the plugin every rank ends each round with its plan
source's first token (and the draft extend fed from it), draft tree (and the verify input
SGLang builds from it) and next top-k, one guarded collective per site and round.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sglang_harness import forkserver
from test_sglang_plugin import widths
from test_sglang_sites import SOURCES, TOPOLOGY, hold_their_sources, replicas_differ
from wheels import engine_root

from tests.helpers import compile_spec
from tests.ranks import launch

HERE = Path(__file__).resolve().parent


pytestmark = pytest.mark.engines

# name -> (plan method, topk, num_steps, num_draft_tokens): a chain and a tree
SHAPES = {"chain": ("eagle3", 1, 3, 4), "tree": ("eagle", 4, 3, 8), "one_step": ("eagle", 4, 1, 4)}
DRAFT = ("draft_tokens", "verify_tokens", "custom_mask", "positions", "retrieve_index",
         "retrieve_next_token", "retrieve_next_sibling")
EXTEND = ("topk_index", "topk_p")
FIRST = ("next_token_ids", "bonus_tokens", "tails", "topk_index")


def plan(tmp: Path, shape: str, topo: str) -> Path:
    method, topk, steps, n = SHAPES[shape]
    return compile_spec(tmp / f"{shape}-{topo}", f"""
name: draft-{shape}-{topo}
engine: sglang
topology: {TOPOLOGY[topo][0]}
model: {{num_layers: 8, hidden_size: 64, vocab_size: 1000}}
speculative: {{method: {method}, num_steps: {steps}, topk: {topk}, num_draft_tokens: {n}, sampling: sampling}}
sync: {{policy: all}}
runtime: {{max_batch: 8, timeout_s: 60}}
""")


def run(worker: str, shape: str, topo: str, tmp: Path | None, forge: str = "") -> list[dict]:
    method, topk, steps, n = SHAPES[shape]
    engine = dict(speculative_algorithm=method.upper(), speculative_num_steps=steps,
                  speculative_eagle_topk=topk, speculative_num_draft_tokens=n)
    env = {"SGLANG_USE_MESSAGE_QUEUE_BROADCASTER": "false", "TRITON_INTERPRET": "1",
           "TORCHDYNAMO_DISABLE": "1",  # select_top_k_tokens is torch.compile'd: run it eagerly
           "SPECPLAN_PLAN": str(plan(tmp, shape, topo)) if tmp else ""}
    root = engine_root("sglang")
    results = launch(len(SOURCES[topo]), worker, str(root),
                     json.dumps(widths(**TOPOLOGY[topo][1])), json.dumps(engine), forge,
                     module="sglang_draft_workers", preload=forkserver(root), path=(HERE,),
                     env=env, timeout=600)
    for r in results:
        assert r.returncode == 0 and r.result is not None, (r.rank, r.stdout[-800:], r.stderr[-3000:])
    return [r.result for r in results]


def targets(path) -> list[str]:
    """The functions draft_hooks hooks for the plan at `path`."""
    from specplan.plan import load_plan
    from specplan.plugins.common import ActivePlan
    from specplan.plugins.sglang_draft import draft_hooks

    state = type("State", (), {})()
    state.active = ActivePlan("sglang", str(path), load_plan(path))
    return [t for t, _ in draft_hooks(state)]


def test_the_draft_sites_are_hooked_only_for_a_plan_that_converges_them(tmp_path):
    from specplan.plugins.sglang_draft import DRAFT, DRAFT_EXTEND, TARGET

    assert targets(plan(tmp_path, "tree", "tp2")) == [TARGET, DRAFT, DRAFT_EXTEND]
    dspark = compile_spec(tmp_path / "dspark", """
name: dspark
engine: sglang
topology: {tp: 2, device: cpu}
model: {num_layers: 8, hidden_size: 64, vocab_size: 1000}
speculative: {method: dspark, num_steps: 3, sampling: sampling}
""")
    assert targets(dspark) == []


def through_the_plugin(outs, topo: str, site) -> None:
    """The ranks of a replica drew their own values (they differ), every rank holds its
    source's, and each round's one collective is the plugin's (SGLang broadcasts nothing)."""
    assert replicas_differ(outs, topo, site)
    hold_their_sources(outs, topo, site)
    for out in outs:
        assert [r["broadcasts"] for r in out["rounds"]] == [1, 1, 1]


def without_the_plugin(outs, site) -> None:
    """At tp 2 without the plugin, rank 1 keeps its own values from round 0 on."""
    with pytest.raises(AssertionError, match="rank 1 round 0"):
        hold_their_sources(outs, "tp2", site)


@pytest.mark.parametrize("shape", ["chain", "tree"])
@pytest.mark.parametrize("topo", ["tp2", pytest.param("dpattn", marks=pytest.mark.slow)])
def test_draft_tree_is_the_sources_through_the_plugin(tmp_path, shape, topo):
    outs = run("draft", shape, topo, tmp_path)
    through_the_plugin(outs, topo, DRAFT)


def test_a_one_step_tree_is_one_guarded_collective_with_an_empty_parent_list(tmp_path):
    # num_steps 1: SGLang's parent_list is [bs, 0] (organize_draft_results keeps no parents),
    # and so is the plan's: the draft is still the plan's one boundary, the source's tree.
    outs = run("draft", "one_step", "tp2", tmp_path)
    through_the_plugin(outs, "tp2", DRAFT)


@pytest.mark.parametrize("shape", ["chain", "tree"])
def test_draft_tree_without_the_plugin_differs_across_tp_ranks(shape):
    outs = run("draft", shape, "tp2", None)
    assert all(r["broadcasts"] == 0 for out in outs for r in out["rounds"])
    without_the_plugin(outs, DRAFT)


@pytest.mark.parametrize("shape", ["chain", "tree"])
@pytest.mark.parametrize("topo", ["tp2", pytest.param("dpattn", marks=pytest.mark.slow)])
def test_draft_extend_topk_is_the_sources_through_the_plugin(tmp_path, shape, topo):
    outs = run("draft_extend", shape, topo, tmp_path)
    through_the_plugin(outs, topo, EXTEND)


def test_draft_extend_without_the_plugin_differs_across_tp_ranks():
    outs = run("draft_extend", "tree", "tp2", None)
    without_the_plugin(outs, EXTEND)


@pytest.mark.parametrize("shape", ["chain", "tree"])
@pytest.mark.parametrize("topo", ["tp2", pytest.param("dpattn", marks=pytest.mark.slow)])
def test_first_token_is_the_sources_through_the_plugin(tmp_path, shape, topo):
    # Each rank's sampler drew its own first tokens; every rank of a replica commits its
    # source's, and feeds them to the draft extend (its tail tokens, the next bonus tokens).
    outs = run("target", shape, topo, tmp_path)
    through_the_plugin(outs, topo, FIRST)  # each round's idle batch (called first) issues none


def test_first_token_without_the_plugin_differs_across_tp_ranks():
    outs = run("target", "chain", "tp2", None)
    assert all(r["broadcasts"] == 0 for out in outs for r in out["rounds"])
    without_the_plugin(outs, FIRST)


@pytest.mark.parametrize("worker", ["target", "draft", "draft_extend"])
def test_a_forged_guard_header_is_caught(tmp_path, worker):
    # Rank 1 claims round 7 at round 2: it receives its source's header for round 2 and raises.
    outs = run(worker, "chain", "tp2", tmp_path, forge="1:2")
    assert all("desync" not in r for r in outs[0]["rounds"] + outs[1]["rounds"][:2])
    err = outs[1]["rounds"][2]["desync"]
    assert "round" in err and "rank 1" in err, err
