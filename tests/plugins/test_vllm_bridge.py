"""The vLLM plugin without vLLM: its codec (vllm_codec.py), its site mapping, and SPECPLAN_PLAN
unset costing nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from types import SimpleNamespace as NS

from specplan.plan import load_plan
from specplan.plugins.vllm_codec import PlanMismatch, decode_accept, encode_accept, plan_sites

torch = pytest.importorskip("torch")
PLANS = Path(__file__).parents[1] / "golden" / "plans"


CHAIN = ("predict", "accept_index", "num_correct_drafts")


def test_codec_carries_the_accepted_prefix_and_drops_stale_columns():
    sampled = torch.tensor([[5, 6, 7, 8], [9, 123456789, -7, 3], [4, 0, 0, 0]])
    num = torch.tensor([4, 1, 0], dtype=torch.int32)  # row 2: a chunked-prefill row, no sample
    enc = encode_accept("path", CHAIN, sampled, num, 4)
    assert enc["predict"].tolist() == [5, 6, 7, 8, 9, -1, -1, -1, -1, -1, -1, -1]
    assert enc["accept_index"].tolist() == [[0, 1, 2, 3], [4, -1, -1, -1], [-1, -1, -1, -1]]
    assert enc["num_correct_drafts"].tolist() == [3, 0, -1]
    out, n = decode_accept("path", CHAIN, enc, 3, 4)
    assert out.dtype == torch.int64 and n.tolist() == [4, 1, 0]
    assert [row[:k] for row, k in zip(out.tolist(), n.tolist())] == [[5, 6, 7, 8], [9], []]


def test_width_one_step_pads_to_the_plan_width():
    enc = encode_accept("path", CHAIN, torch.tensor([[11], [12]]), torch.tensor([1, 1], dtype=torch.int32), 3)
    assert enc["predict"].tolist() == [11, -1, -1, 12, -1, -1]


def test_count_and_bonus_decode_the_accepted_drafts_from_the_steps_inputs():
    """DSpark's decisions: count + bonus; the accepted drafts are the inputs of logits rows 1..count."""
    names = ("correct_len_sample", "bonus_sample", "cap_trim_lens_sample")
    drafts = [[21, 22, 23], [31, 32, 33], [41, 42, 43]]
    sampled = torch.tensor([[21, 22, 99, 0], [77, 5, 5, 5], [41, 42, 43, 44]])
    num = torch.tensor([3, 1, 4], dtype=torch.int32)
    enc = encode_accept("count_bonus", names, sampled, num, 4)
    assert enc["correct_len_sample"].tolist() == [2, 0, 3] and enc["bonus_sample"].tolist() == [99, 77, 44]
    assert enc["cap_trim_lens_sample"].tolist() == [0, 0, 0]
    inputs = torch.tensor([t for r, d in enumerate(drafts) for t in [1000 + r, *d]])  # row 0: last token
    batch = NS(input_ids=inputs, logits_indices=torch.arange(12), cu_num_logits=torch.tensor([0, 4, 8, 12]))
    out, n = decode_accept("count_bonus", names, enc, 3, 4, batch)
    assert n.tolist() == [3, 1, 4]
    assert [row[:k] for row, k in zip(out.tolist(), n.tolist())] == [[21, 22, 99], [77], [41, 42, 43, 44]]


def test_dflash_greedy_carries_the_targets_prefix():
    enc = encode_accept("target_predict", ("target_predict",), torch.tensor([[3, 4, 9], [8, 0, 0]]),
                        torch.tensor([3, 1], dtype=torch.int32), 4)
    assert enc["target_predict"].tolist() == [[3, 4, 9, -1], [8, -1, -1, -1]]
    out, n = decode_accept("target_predict", ("target_predict",), enc, 2, 4)
    assert n.tolist() == [3, 1] and out[0, :3].tolist() == [3, 4, 9]


@pytest.mark.parametrize("name, accept", [("eagle3-sampling-pp2", "eagle3_accept"),
                                          ("dspark-greedy-pp2", "dspark_accept_greedy"),
                                          ("dflash-greedy-pp2", "dflash_accept_greedy"),
                                          ("dflash-sampling-pp2", "dflash_accept_sample"),
                                          ("ngram-greedy-pp2", "ngram_accept"),
                                          ("ngram-sampling-pp3", "ngram_accept")])
def test_sites_vllm_computes_are_found(name, accept):
    sites = plan_sites(load_plan(PLANS / f"{name}.json"))
    method = name.split("-")[0]
    assert {k: s.name for k, s in sites.items() if s} == {
        "accept": accept, "target": f"{method}_target", "draft": f"{method}_draft"}


def test_other_decisions_are_refused_naming_method_and_site():
    with pytest.raises(PlanMismatch, match=r"speculative.method eagle: site eagle_draft carries "
                                           r"\['draft_tokens', 'parent_list', 'top_scores_index'\]"):
        plan_sites(load_plan(PLANS / "eagle-tree-greedy-pp2.json"))


def test_unset_installs_nothing_and_imports_no_torch():
    env = {k: v for k, v in os.environ.items() if k != "SPECPLAN_PLAN"}
    code = ("import sys, specplan.plugins.vllm as v; v.register(); v.register(); "
            "print(sorted(m for m in ('torch', 'vllm') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
