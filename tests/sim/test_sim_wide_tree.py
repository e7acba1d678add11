"""EAGLE trees wider than one level of topk per step (issue 38's older recipes: topk 8, 5 steps,
64 draft tokens). SGLang's organize_draft_results picks num_draft_tokens - 1 of the
topk + (num_steps - 1) * topk^2 candidates its draft steps score, so a tree may verify more
nodes than 1 + topk * num_steps; the sim drafts such a tree as SGLang does, on gloo ranks, and
stays token-identical to plain greedy decoding."""

from __future__ import annotations

import pytest

from specplan.sim.launch import Options, simulate
from specplan.sim.report import verdict

SPEC = """\
name: wide-tree
engine: sglang
topology: {{tp: 2}}
model: {{num_layers: 4, hidden_size: 64, vocab_size: 512}}
speculative: {{method: eagle, num_steps: {steps}, topk: {topk}, num_draft_tokens: {tokens}}}
sync: {{policy: safe}}
"""


@pytest.mark.parametrize("steps, topk, tokens", [
    (3, 2, 10),  # 1 + topk * num_steps = 7 < 10 <= 1 + 2 + 2 * 4 = 11
    (5, 8, 64),  # the recipes' tree: 64 <= 1 + 8 + 4 * 64 = 265
], ids=["topk2-steps3-10", "topk8-steps5-64"])
def test_a_tree_past_topk_times_steps_is_token_identical_to_greedy(tmp_path, steps, topk, tokens):
    assert tokens > 1 + topk * steps  # past the old bound
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC.format(steps=steps, topk=topk, tokens=tokens))
    out = simulate(str(path), Options(rounds=3, requests=2))
    v = verdict(out)
    assert v.ok, v.problems
    assert set(out.returncodes.values()) == {0}
    assert v.checked == 2 and v.agreed == 2
