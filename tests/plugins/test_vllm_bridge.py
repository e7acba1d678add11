"""The vLLM plugin without vLLM: its codec, its site mapping, and SPECPLAN_PLAN unset costing nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specplan.plugins.vllm_bridge import PlanMismatch, decode_accept, encode_accept, plan_sites

torch = pytest.importorskip("torch")
PLANS = Path(__file__).parents[1] / "golden" / "plans"


def test_codec_carries_the_accepted_prefix_and_drops_stale_columns():
    sampled = torch.tensor([[5, 6, 7, 8], [9, 123456789, -7, 3], [4, 0, 0, 0]])
    num = torch.tensor([4, 1, 0], dtype=torch.int32)  # row 2: a chunked-prefill row, no sample
    enc = encode_accept(sampled, num, 4)
    assert enc["predict"].tolist() == [5, 6, 7, 8, 9, -1, -1, -1, -1, -1, -1, -1]
    assert enc["accept_index"].tolist() == [[0, 1, 2, 3], [4, -1, -1, -1], [-1, -1, -1, -1]]
    assert enc["num_correct_drafts"].tolist() == [3, 0, -1]
    out, n = decode_accept(enc, 3, 4)
    assert out.dtype == torch.int64 and n.tolist() == [4, 1, 0]
    assert [row[:k] for row, k in zip(out.tolist(), n.tolist())] == [[5, 6, 7, 8], [9], []]


def test_width_one_step_pads_to_the_plan_width():
    enc = encode_accept(torch.tensor([[11], [12]]), torch.tensor([1, 1], dtype=torch.int32), 3)
    assert enc["predict"].tolist() == [11, -1, -1, 12, -1, -1]


def test_eagle_family_sites_are_found_and_others_refused():
    plan = json.loads((PLANS / "eagle3-sampling-pp2.json").read_text())
    sites = plan_sites(plan)
    assert {k: s["name"] for k, s in sites.items() if s} == {
        "accept": "eagle3_accept", "target": "eagle3_target", "draft": "eagle3_draft"}
    dspark = json.loads((PLANS / "dspark-greedy-pp2.json").read_text())
    with pytest.raises(PlanMismatch, match=r"site dspark_\w+ carries \["):
        plan_sites(dspark)


def test_unset_installs_nothing_and_imports_no_torch():
    env = {k: v for k, v in os.environ.items() if k != "SPECPLAN_PLAN"}
    code = ("import sys, specplan.plugins.vllm as v; v.register(); v.register(); "
            "print(sorted(m for m in ('torch', 'vllm') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
