"""pipeline_stages: drafter on the last stage with global layer ids, one producer per tap,
tap bytes per link for chain and direct routing, relays under column / ring."""

from __future__ import annotations

from specplan.ir.records import Link

KIMI = """\
name: kimi
engine: vllm
topology: {tp: 8, pp: 2}
model: {num_layers: 93, hidden_size: 7168, vocab_size: 163840}
speculative: {method: dspark, num_steps: 7, aux_layers: [2, 46, 90]}
runtime: {max_batch: 256}
"""
TAP = 256 * 8 * 7168 * 2  # rows (max_batch * verify width) x hidden x bf16


def test_kimi_taps_and_routing(planned):
    pipe = planned(KIMI, upto="pipeline_stages").draft.pipeline
    assert [(s.start_layer, s.end_layer, s.taps) for s in pipe.stages] == [
        (0, 47, (2, 46)), (47, 93, (90,))]
    assert pipe.routing.chain == (Link(link=(0, 1), taps=2, bytes=2 * TAP, messages=0,
                                            note="rides inside the stage handoff"),)
    assert pipe.routing.direct == (Link(link=(0, 1), taps=2, bytes=2 * TAP, messages=1),)
    assert pipe.drafter.stage == 1 and pipe.drafter.pipeline_size == 1
    assert pipe.drafter.layer_ids == (93,)  # after the target's 93 layers, not stage-local 46


PP3 = """\
name: pp3
engine: vllm
topology: {tp: 1, pp: 3}
model: {num_layers: 9, hidden_size: 16, vocab_size: 64}
speculative: {method: eagle3, num_steps: 2, aux_layers: [0, 3, 4, 9]}
pipeline: {aux_routing: direct}
runtime: {max_batch: 2}
"""
TAP3 = 2 * 3 * 16 * 2


def test_middle_stage_chain_vs_direct(planned):
    pipe = planned(PP3, upto="pipeline_stages").draft.pipeline
    # stages [0,3) [3,6) [6,9): tap 0 and the boundary tap 3 on stage 0, 4 on 1, 9 on 2
    assert [s.taps for s in pipe.stages] == [(0, 3), (4,), (9,)]
    chain = [(l.link, l.taps, l.bytes) for l in pipe.routing.chain]
    assert chain == [((0, 1), 2, 2 * TAP3), ((1, 2), 3, 3 * TAP3)]
    direct = [(l.link, l.taps, l.bytes) for l in pipe.routing.direct]
    assert direct == [((0, 2), 2, 2 * TAP3), ((1, 2), 1, TAP3)]


def test_direct_routing_sends_from_each_stage(planned):
    classes = planned(PP3).draft.rank_classes
    taps = [[(o.op, o.peer_member, o.bytes) for o in c.program.decode
             if o.what == "taps_direct"] for c in classes]
    assert taps == [[("send", 2, 2 * TAP3)], [("send", 2, TAP3)],
                    [("recv", 0, 2 * TAP3), ("recv", 1, TAP3)]]


def test_broadcast_relay_needs_no_relay_but_column_does(planned):
    spec = PP3.replace("pipeline: {aux_routing: direct}", "pipeline: {relay: broadcast}")
    assert planned(spec).draft.pipeline.relay.sites == []
    column = planned(spec.replace("relay: broadcast", "relay: column")).draft
    relayed = [r.site for r in column.pipeline.relay.sites]
    assert relayed == ["eagle3_target", "eagle3_draft", "eagle3_accept"]
    assert all(column.sites[s].family == "replica_stage" for s in relayed)


def test_ring_relay_order(planned):
    spec = PP3.replace("pipeline: {aux_routing: direct}", "pipeline: {relay: ring}")
    classes = planned(spec).draft.rank_classes
    ring = [[(o.recv_from, o.send_to) for o in c.program.decode
             if o.op == "ring" and o.site == "eagle3_accept"] for c in classes]
    assert ring == [[(2, 1)], [(0, None)], [(None, 0)]]  # last -> 0 -> 1
