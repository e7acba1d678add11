"""pin_widths: a 32-byte guard header, then each field 8-aligned, sized at max_batch; one
buffer size per family for broadcasts, a MIN keeps its own."""

from __future__ import annotations

EAGLE_TREE = """\
name: eagle-tree
engine: sglang
topology: {tp: 2}
model: {num_layers: 8, hidden_size: 64, vocab_size: 128}
speculative: {method: eagle, num_steps: 3, topk: 2, num_draft_tokens: 5, sampling: sampling}
sync: {policy: all}
runtime: {max_batch: 3}
"""


def test_eagle_accept_layout(planned):
    s = planned(EAGLE_TREE, upto="pin_widths").draft
    accept = next(b for b in s.boundaries if b.sites == ["eagle_accept"])
    fields = [(f.decision, f.shape, f.offset, f.bytes) for f in accept.layout.fields]
    # predict [bs*N] int32 = 60 B -> 64; accept_index [bs, S+1] int32 = 48 B; num_correct [bs] int32
    assert fields == [("predict", (15,), 32, 60), ("accept_index", (3, 4), 96, 48),
                      ("num_correct_drafts", (3,), 144, 12)]
    assert accept.layout.bytes == 160
    assert accept.layout.header_bytes == 32
    assert [h[0] for h in accept.layout.header] == ["boundary", "live_rows", "round", "fingerprint",
                                                         "batch"]


def test_one_buffer_per_family_and_min_keeps_its_own(planned):
    spec = EAGLE_TREE.replace("method: eagle, num_steps: 3, topk: 2, num_draft_tokens: 5",
                              "method: dflash, num_steps: 3")
    s = planned(spec, upto="pin_widths").draft
    largest = max(b.layout.bytes for b in s.boundaries if b.op == "broadcast")
    assert s.buffer_bytes == {"replica": largest}
    for b in s.boundaries:
        want = largest if b.op == "broadcast" else b.layout.bytes
        assert b.buffer_bytes == want, b.sites
    mem = next(b for b in s.boundaries if b.op == "all_reduce_min")
    assert mem.layout.header_bytes == 0 and mem.buffer_bytes == 8
