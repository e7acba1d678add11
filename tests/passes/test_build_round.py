"""build_round: compute per stage chained by handoffs, decisions on the deciding stage."""

from __future__ import annotations

SPEC = """\
name: br
engine: vllm
topology: {tp: 1, pp: 2}
model: {num_layers: 4, hidden_size: 16, vocab_size: 64}
speculative: {method: eagle, num_steps: 2}
runtime: {max_batch: 1}
"""


def test_decode_round_shape(planned):
    g = planned(SPEC, upto="build_round").graph
    assert [n.id for n in g.nodes("compute", round="decode")] == [
        "compute:decode.draft@1", "compute:decode.target_verify@0", "compute:decode.target_verify@1",
        "compute:decode.draft_extend@1"]
    assert g.edge("compute:decode.target_verify@0", "compute:decode.target_verify@1")["kind"] == "pp_handoff"
    # non-deterministic decisions are made on the last stage only; stage 0 reads them unconverged
    assert [n.stage for n in g.nodes("decision", round="decode") if n.name == "predict"] == [1]
    assert g.edge("decision:decode.predict@1", "materialize:decode.accept@0")["carries"] == ("predict",)
    assert [n.stage for n in g.nodes("decision") if n.name == "adaptive_num_steps"] == [0, 1]
    assert not g.nodes("converge")
