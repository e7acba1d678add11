"""specplan's KV handoff against the engines' own functions, called with the engines' inputs.

SGLang 0.5.23: CommonKVManager._resolve_rank_mapping (target TP / CP / PP ranks, responses,
destinations per prefill rank), get_mha_kv_ptrs_with_pp (where each prefill layer lands) and
compute_head_slice_params (which KV heads move). vLLM 0.33.0: compute_tp_mapping and
TransferTopology (nixl pull), handshake_target_ranks and resolve_need_send (mooncake), and
_compute_sender_transfer_plan (the byte slice a producer rank copies into a consumer rank).
"""

from __future__ import annotations

import dataclasses
import typing
from types import SimpleNamespace

import numpy as np
import pytest

from specplan.deploy.handoff import plan_handoff
from tests.deploy.pairs import (MOONCAKE_PP_PAIRS, NIXL_PAIRS, REPLICATED_PULL_PAIRS,
                                SGLANG_DCP_PAIRS, SGLANG_PAIRS, VLLM_DCP_PAIRS, VLLM_PAIRS,
                                VLLM_PCP_PAIRS, deployment)
from tests.engines.extract import QuietLogger, compile_defs
from tests.engines.wheels import engine_root

pytestmark = pytest.mark.engines


@pytest.fixture(scope="module")
def sglang():
    conn = engine_root("sglang") / "sglang/srt/disaggregation/common"
    ns = {"dataclasses": dataclasses, "logger": QuietLogger(), **vars(typing)}
    compile_defs(conn / "conn.py", ["PrefillServerInfo"], ns)
    compile_defs(conn / "conn.py", ["_resolve_rank_mapping", "get_mha_kv_ptrs_with_pp"], ns,
                 cls="CommonKVManager")
    compile_defs(conn / "staging_buffer.py", ["compute_head_slice_params"], ns)
    return SimpleNamespace(**ns)


class AttentionSpec:  # the tested functions only ask issubclass(t, MambaSpec / AttentionSpec)
    pass


class MambaSpec:
    pass


@pytest.fixture(scope="module")
def vllm():
    kv = engine_root("vllm") / "vllm/distributed/kv_transfer/kv_connector"
    ns = {"dataclass": dataclasses.dataclass, "np": np, "AttentionSpec": AttentionSpec,
          "MambaSpec": MambaSpec, "logger": QuietLogger(), **vars(typing)}
    compile_defs(kv / "utils.py", ["TransferTopology"], ns)
    compile_defs(kv / "v1/nixl/tp_mapping.py", ["TPMapping", "_is_attention_spec", "_is_ssm_spec",
                                                  "compute_head_offset", "compute_tp_mapping"], ns)
    moon = kv / "v1/mooncake/mooncake_connector.py"
    compile_defs(moon, ["_get_tp_ratio", "_compute_sender_transfer_plan"], ns)
    compile_defs(moon, ["resolve_need_send"], ns, cls="MooncakeConnectorWorker")
    compile_defs(kv / "v1/nixl/base_worker.py", ["_validate_remote_parallel_config"], ns,
                 cls="NixlBaseConnectorWorker")
    return SimpleNamespace(**ns)


def _planned(engine: str, connector: str, prefill: dict, decode: dict, attention: str, kv_heads: int):
    """The handoff specplan plans for the pair, and its prefill and decode sides."""
    h = plan_handoff(deployment(engine, prefill, decode, connector, attention=attention, kv_heads=kv_heads))
    return h, h.prefill, h.decode


def _ids(pairs):
    return [f"{a}->{b}-{attn}{k}" for a, b, attn, k in pairs]


@pytest.mark.parametrize("prefill,decode,attention,kv_heads", SGLANG_PAIRS, ids=_ids(SGLANG_PAIRS))
def test_sglang_rank_mapping(sglang, prefill, decode, attention, kv_heads):
    h, p, d = _planned("sglang", "mooncake", prefill, decode, attention, kv_heads)
    assert not h.refusals and len(h.entries) == d.num_ranks
    world = d.mesh.world_size
    for e in h.entries:
        r = e["decode_rank"]
        me = SimpleNamespace(attn_tp_size=d.attn_tp, is_mla_backend=d.is_mla,
                             is_hybrid_mla_backend=False, attn_cp_size=d.cp, attn_cp_rank=0,
                             enable_all_cp_ranks_for_transfer=False, pp_size=d.pp,
                             pp_rank=d.pp_of[r],
                             kv_args=SimpleNamespace(engine_rank=d.mesh.coords["tp"][r % world]))
        info = sglang.PrefillServerInfo(attn_tp_size=p.attn_tp, attn_cp_size=p.cp, dp_size=p.dp,
                                        pp_size=p.pp, page_size=None, kv_cache_dtype=None,
                                        follow_bootstrap_room=True)
        sglang._resolve_rank_mapping(me, info)
        assert e["prefill_tp_ranks"] == info.target_tp_ranks
        assert e["prefill_cp_ranks"] == info.target_cp_ranks
        assert e["prefill_pp_ranks"] == info.target_pp_ranks
        assert e["responses_expected"] == info.required_prefill_response_num
        assert e["consumers_per_source"] == info.required_dst_info_num
        assert e["prefill_dp_rank"] == d.dp_of[r] % p.dp  # bootstrap_room = decode DP index
        _sglang_heads(sglang, h, e)
        _sglang_layers(sglang, h, e)


def _sglang_heads(sglang, h, e):
    """The heads compute_head_slice_params moves from each source land on the decode slice."""
    p, d = h.prefill, h.decode
    if d.is_mla or p.attn_tp == d.attn_tp:
        return
    r = e["decode_rank"]
    got = set()
    for src in e["prefill_tp_ranks"]:
        src_start, count, dst_start, _ = sglang.compute_head_slice_params(
            p.attn_tp, d.attn_tp, src, d.tp_of[r], d.num_kv_heads)
        first = p.heads(src)[0] + src_start
        assert first == e["head_offset"] + dst_start
        got |= set(range(first, first + count))
    assert got == set(range(e["head_offset"], e["head_offset"] + e["head_count"]))


def _sglang_layers(sglang, h, e):
    """Each prefill stage's pointers land in the decode slots of the same global layer."""
    p, d = h.prefill, h.decode
    held = range(*d.stages[d.pp_of[e["decode_rank"]]])
    dst = [("K", i) for i in held] + [("V", i) for i in held]
    targets = [r for r in e["layers"] if r[1] <= p.num_layers]
    for stage, (start, end) in zip(e["prefill_pp_ranks"], targets):
        assert (start, end) == p.stages[stage]
        src = [("K", i) for i in range(start, end)] + [("V", i) for i in range(start, end)]
        me = SimpleNamespace(kv_args=SimpleNamespace(prefill_start_layer=start))
        src_k, _, dst_k, _, n = sglang.get_mha_kv_ptrs_with_pp(me, src, dst)
        assert n == end - start and [i for _, i in dst_k] == [i for _, i in src_k]


def _topology(v, tp_rank, tp_size, d_or_p, dcp_size=1):
    return v.TransferTopology(tp_rank=tp_rank, tp_size=tp_size, block_size=16, engine_id="x",
                              is_mla=d_or_p.is_mla, is_mamba=False,
                              total_num_kv_heads=d_or_p.num_kv_heads, attn_backends=[],
                              dcp_size=dcp_size)


@pytest.mark.parametrize("prefill,decode,attention,kv_heads", NIXL_PAIRS, ids=_ids(NIXL_PAIRS))
def test_vllm_nixl_pull_mapping(vllm, prefill, decode, attention, kv_heads):
    h, p, d = _planned("vllm", "nixl", prefill, decode, attention, kv_heads)
    assert not h.refusals
    for e in h.entries:
        topo = _topology(vllm, d.tp_of[e["decode_rank"]], d.attn_tp, d)
        mapping = vllm.compute_tp_mapping(topo, p.attn_tp, (AttentionSpec,))
        assert e["prefill_tp_ranks"] == list(mapping.all_source_ranks)
        assert e["consumers_per_source"] == mapping.local_consumers
        # _nixl_handshake walks range(remote_pp_size): one read per source rank and stage
        assert e["prefill_pp_ranks"] == list(range(p.pp))
        assert e["responses_expected"] == len(mapping.all_source_ranks) * p.pp


@pytest.mark.parametrize("prefill,decode,attention,kv_heads", VLLM_PAIRS + MOONCAKE_PP_PAIRS,
                         ids=_ids(VLLM_PAIRS + MOONCAKE_PP_PAIRS))
def test_vllm_mooncake_plan(vllm, prefill, decode, attention, kv_heads):
    h, p, d = _planned("vllm", "mooncake", prefill, decode, attention, kv_heads)
    assert not h.refusals
    for e in h.entries:
        tp = d.tp_of[e["decode_rank"]]
        assert e["prefill_tp_ranks"] == _topology(vllm, tp, d.attn_tp, d).handshake_target_ranks(p.attn_tp)
        for src in e["prefill_tp_ranks"]:
            producer = SimpleNamespace(pp_size=p.pp)
            send = SimpleNamespace(transfer_id="t")
            paired = _topology(vllm, src, p.attn_tp, p).handshake_target_ranks(d.attn_tp)
            vllm.resolve_need_send(producer, send, paired, d.pp)
            assert e["consumers_per_source"] == send.need_send
            assert h.consumers_seen[(src, 0, e["prefill_pp_ranks"][0])] == send.need_send
        _mooncake_heads(vllm, h, e)


def _mooncake_heads(vllm, h, e):
    """Copying one head per byte, the slices the producers send tile the decode rank's heads."""
    p, d = h.prefill, h.decode
    if d.is_mla:
        return
    tp = d.tp_of[e["decode_rank"]]
    got = set()
    for src in e["prefill_tp_ranks"]:
        src_heads, dst_heads = p.heads(src)[1], d.heads(tp)[1]
        send, src_off, dst_off, length = vllm._compute_sender_transfer_plan(
            src, p.attn_tp, tp, d.attn_tp, src_heads, dst_heads,
            producer_cache_replicated=p.attn_tp > p.num_kv_heads, total_num_kv_heads=p.num_kv_heads)
        if not send:
            continue
        first = p.heads(src)[0] + src_off
        assert first == e["head_offset"] + dst_off
        got |= set(range(first, first + length))
    assert got == set(range(e["head_offset"], e["head_offset"] + e["head_count"]))


OURS = "vLLM 0.33.0 maps only TP 1"  # the one PCP refusal that is specplan's, not the engine's


@pytest.mark.parametrize("connector", ["nixl", "nixl_push"])
@pytest.mark.parametrize("prefill,decode,attention,kv_heads", VLLM_PCP_PAIRS,
                         ids=_ids(VLLM_PCP_PAIRS))
def test_vllm_nixl_prefill_context_parallel(vllm, connector, prefill, decode, attention, kv_heads):
    """Refusals as _validate_remote_parallel_config raises them; replicated PCP reads PCP rank 0
    by the TP mapping; sharded PCP reads compute_tp_mapping's sources over the PCP ranks
    (NixlBaseConnectorWorker: transfer_tp_size = pcp_size), with its local_consumers."""
    h, p, d = _planned("vllm", connector, prefill, decode, attention, kv_heads)
    me = SimpleNamespace(pcp_size=d.cp, dcp_size=d.dcp)
    try:
        vllm._validate_remote_parallel_config(me, SimpleNamespace(pcp_size=p.cp, dcp_size=p.dcp))
        raised = None
    except NotImplementedError as exc:
        raised = str(exc)
    # NixlPushConnector.__init__'s own DCP refusal: test_vllm_push_refuses_dcp
    engine_refusals = [r for r in h.refusals if OURS not in r.message and r.kind != "dcp-refused"]
    assert bool(raised) == bool(engine_refusals), (raised, h.refusals)
    if raised:
        assert raised.split(".")[0] in engine_refusals[0].message
    if h.refusals:
        return
    sharded = p.cp > 1 and p.dcp > 1
    for e in h.entries:
        topo = _topology(vllm, d.tp_of[e["decode_rank"]], d.attn_tp, d, dcp_size=d.dcp)
        if sharded:
            mapping = vllm.compute_tp_mapping(topo, p.cp, (AttentionSpec,), remote_dcp_size=p.dcp)
            assert e["prefill_cp_ranks"] == list(mapping.all_source_ranks)
            assert e["prefill_tp_ranks"] == [0]
            assert e["consumers_per_source"] == mapping.local_consumers
            assert e["responses_expected"] == len(mapping.all_source_ranks) * p.pp
        else:
            mapping = vllm.compute_tp_mapping(topo, p.attn_tp, (AttentionSpec,))
            assert e["prefill_cp_ranks"] == [0]  # pull_worker / push_worker: PCP rank 0 serves
            if connector == "nixl":
                assert e["prefill_tp_ranks"] == list(mapping.all_source_ranks)
                assert e["consumers_per_source"] == mapping.local_consumers


# -- decode context parallel across the handoff (issue 21) ---------------------------------------

@pytest.mark.parametrize("prefill,decode,attention,kv_heads", SGLANG_DCP_PAIRS, ids=_ids(SGLANG_DCP_PAIRS))
def test_sglang_dcp_pairs(prefill, decode, attention, kv_heads):
    """CommonKVManager.requires_dcp_relayout (the prefill side) raises exactly when specplan
    refuses the pair (here every refused pair is one it refuses too); each refusal quotes the
    wheel's words."""
    conn = engine_root("sglang") / "sglang/srt/disaggregation/common/conn.py"
    ns = compile_defs(conn, ["requires_dcp_relayout"], {}, cls="CommonKVManager")
    h, p, d = _planned("sglang", "mooncake", prefill, decode, attention, kv_heads)
    me = SimpleNamespace(dcp_size=p.dcp, dcp_rank=0, is_mla_backend=p.is_mla, is_hybrid_mla_backend=False)
    try:
        ns["requires_dcp_relayout"](me, d.dcp, 0)
        engine_refuses = False
    except RuntimeError:
        engine_refuses = True
    ours = [r.message for r in h.refusals]
    assert engine_refuses == bool(ours), ours  # the decode side's refusals come first
    assert engine_refuses or not any("requires_dcp_relayout" in m for m in ours)
    source = conn.read_text()
    for message in ours:
        quoted = message.split('"')[1]
        assert quoted.split(":")[0] in source, quoted


@pytest.mark.parametrize("prefill,decode,attention,kv_heads", VLLM_DCP_PAIRS, ids=_ids(VLLM_DCP_PAIRS))
def test_vllm_nixl_reads_a_dcp_sharded_prefill(vllm, prefill, decode, attention, kv_heads):
    """compute_tp_mapping's MLA DCP branch (remote_dcp_size > 1): the sources and consumers."""
    h, p, d = _planned("vllm", "nixl", prefill, decode, attention, kv_heads)
    assert not h.refusals
    for e in h.entries:
        topo = _topology(vllm, d.tp_of[e["decode_rank"]], d.attn_tp, d, dcp_size=d.dcp)
        mapping = vllm.compute_tp_mapping(topo, p.attn_tp, (AttentionSpec,), remote_dcp_size=p.dcp)
        assert e["prefill_tp_ranks"] == list(mapping.all_source_ranks)
        assert e["consumers_per_source"] == topo.dcp_consumer_count(p.attn_tp, p.dcp)
        assert e["responses_expected"] == len(mapping.all_source_ranks) * p.pp


@pytest.mark.parametrize("prefill,decode,attention,kv_heads", NIXL_PAIRS + REPLICATED_PULL_PAIRS,
                         ids=_ids(NIXL_PAIRS + REPLICATED_PULL_PAIRS))
def test_vllm_nixl_refuses_replicated_kv_from_a_wider_prefill(vllm, prefill, decode, attention, kv_heads):
    """The pulling decode's _validate_remote_agent_handshake: `assert not (tp_ratio < 0 and
    is_kv_replicated)` for non-MLA KV, with the wheel's TransferTopology.tp_ratio and
    is_kv_replicated."""
    h, p, d = _planned("vllm", "nixl", prefill, decode, attention, kv_heads)
    topo = _topology(vllm, 0, d.attn_tp, d)
    topo._engines = {("p", 0): SimpleNamespace(remote_tp_size=p.attn_tp)}
    asserts = not d.is_mla and topo.tp_ratio(p.attn_tp) < 0 and topo.is_kv_replicated("p")
    assert asserts == ("replicated-kv" in [r.kind for r in h.refusals])
    source = (engine_root("vllm") / "vllm/distributed/kv_transfer/kv_connector/v1/nixl/base_worker.py").read_text()
    assert "tp_ratio < 0 and self.transfer_topo.is_kv_replicated(remote_engine_id)" in source


# -- DCP across the handoff, issue 37 -----------------------------------------------------------

@pytest.mark.parametrize("prefill,decode", [({"tp": 4, "dcp": 2}, {"tp": 2, "dcp": 2}),
                                            ({"tp": 2, "dcp": 2}, {"tp": 4, "dcp": 2}),
                                            ({"tp": 2, "dcp": 2}, {"tp": 2, "dcp": 2})])
def test_sglang_equal_dcp_needs_equal_attention_tp(sglang, prefill, decode):
    """Every prefill rank a decode rank connects to (SGLang's own _resolve_rank_mapping) checks
    requires_dcp_relayout with both DCP ranks: equal DCP sizes at different attention TP meet a
    prefill rank of another DCP rank ("PD peers must connect matching DCP ranks")."""
    conn = engine_root("sglang") / "sglang/srt/disaggregation/common/conn.py"
    ns = compile_defs(conn, ["requires_dcp_relayout"], {}, cls="CommonKVManager")
    h, p, d = _planned("sglang", "mooncake", prefill, decode, "mla", 1)
    raised = []
    for t in range(d.attn_tp):
        me = SimpleNamespace(attn_tp_size=d.attn_tp, is_mla_backend=True, is_hybrid_mla_backend=False,
                             attn_cp_size=1, attn_cp_rank=0, enable_all_cp_ranks_for_transfer=False,
                             pp_size=1, pp_rank=0, kv_args=SimpleNamespace(engine_rank=t))
        info = sglang.PrefillServerInfo(attn_tp_size=p.attn_tp, attn_cp_size=1, dp_size=1, pp_size=1,
                                        page_size=None, kv_cache_dtype=None, follow_bootstrap_room=True)
        sglang._resolve_rank_mapping(me, info)
        for r in info.target_tp_ranks:
            src = SimpleNamespace(dcp_size=p.dcp, dcp_rank=r % p.dcp, is_mla_backend=True,
                                  is_hybrid_mla_backend=False)
            try:
                ns["requires_dcp_relayout"](src, d.dcp, t % d.dcp)
            except RuntimeError as exc:
                raised.append(str(exc))
    ours = [r.message for r in h.refusals]
    assert bool(raised) == bool(ours) == (p.attn_tp != d.attn_tp), (raised, ours)
    assert all("PD peers must connect matching DCP ranks" in m for m in ours + raised)


def test_vllm_nixl_dcp_rules_quote_the_wheel():
    """NixlPushConnector.__init__ refuses decode_context_parallel_size > 1 on either instance;
    _validate_remote_agent_handshake asserts the two DCP sizes divide one another. The planned
    refusals quote the wheel's words (tests/cli/test_engine_rules_cli.py runs them end to end)."""
    nixl = engine_root("vllm") / "vllm/distributed/kv_transfer/kv_connector/v1/nixl"
    push = plan_handoff(deployment("vllm", {"tp": 2}, {"tp": 2, "dcp": 2}, "nixl_push", attention="mla", kv_heads=1))
    pull = plan_handoff(deployment("vllm", {"tp": 6, "dcp": 3}, {"tp": 2, "dcp": 2}, "nixl", attention="mla", kv_heads=1))
    (pushed,), (pulled,) = push.refusals, pull.refusals
    assert pushed.message.split('"')[1] in (nixl / "connector.py").read_text()
    assert "DCP sizes must divide one another" in (nixl / "base_worker.py").read_text()
    assert "DCP sizes must divide one another: local=2, remote=3" in pulled.message
    assert not plan_handoff(deployment("vllm", {"tp": 4, "dcp": 4}, {"tp": 2, "dcp": 2}, "nixl",
                                       attention="mla", kv_heads=1)).refusals
