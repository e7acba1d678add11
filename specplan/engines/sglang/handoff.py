"""SGLang's KV handoff rules, every transfer backend (mooncake, nixl, ascend: AscendKVManager
subclasses MooncakeKVManager and keeps its rank mapping).

CommonKVManager._resolve_rank_mapping (sglang/srt/disaggregation/common/conn.py), read from the
newest supported wheel; layers by pointer position from the prefill stage's
prefill_start_layer (get_mha_kv_ptrs_with_pp), draft entries appended after them.

Worked example, 8 ranks: prefill attn_tp 2 x pp 2 (4 ranks) -> decode attn_tp 4 (4):
    decode TP rank 3 pulls prefill TP rank 3 // (4 // 2) = 1 on stages [0, 1]: 2 responses;
    each prefill rank's blocks have 4 // 2 = 2 consumers.
"""

from __future__ import annotations

from specplan.engines.handoff import Axes, Pull, Refusal, pp_sources
from specplan.engines.reads import Geometry
from specplan.engines.releases import newest
from specplan.engines.sglang import NAME

# The mesh coordinates SGLang's connectors call dp, attention-TP and CP.
AXES = Axes(dp="attn_dp", tp="attn_tp", cp="attn_cp", attn_tp="attn_tp")
CONNECTORS = ("mooncake", "nixl", "ascend")  # --disaggregation-transfer-backend, as specplan plans them
DEFAULT_CONNECTOR = "mooncake"  # arg_groups/fields/disagg.py
_SG = newest(NAME)  # the release whose code these rules read


class SGLangRules:
    engine = NAME
    by_name = False  # layers land by pointer position from the prefill stage's first layer
    naming = "SGLang pairs KV entries by layer id (build_kv_layer_ids), draft ids included"
    function = f"{NAME} {_SG} CommonKVManager._resolve_rank_mapping (disaggregation/common/conn.py)"

    def __init__(self, connector: str):
        self.connector = connector

    def refusals(self, p: Geometry, d: Geometry) -> list[Refusal]:
        out = []
        if d.cp != 1:
            out.append(Refusal("decode-cp", f"decode cp={d.cp}: SGLang's _resolve_rank_mapping "
                               f"asserts \"Decode cp size ({d.cp}) should be equal to 1\""))
        if d.pp not in (1, p.pp):
            out.append(Refusal("pp-refused", f"decode pp={d.pp} is neither 1 nor the prefill "
                               f"pp={p.pp}: SGLang asserts \"Decode pp size ({d.pp}) should be "
                               f"equal to prefill pp size ({p.pp}) or 1\""))
        return out + _sglang_dcp(p, d)

    def pull(self, p: Geometry, d: Geometry, tp: int, stage: int) -> Pull:
        big, small = max(p.attn_tp, d.attn_tp), min(p.attn_tp, d.attn_tp)
        ratio = big // small
        tp_ranks: tuple[int, ...]
        if d.attn_tp >= p.attn_tp:
            tp_ranks, consumers, responses = (tp // ratio,), ratio, 1
        else:
            tp_ranks = tuple(range(tp * ratio, (tp + 1) * ratio))
            consumers, responses = 1, 1 if d.is_mla else ratio
        # Without SGLANG_DISAGGREGATION_ALL_CP_RANKS_TRANSFER only prefill CP rank 0 sends.
        pp_ranks, factor = pp_sources(p, d, stage)
        return Pull(tp_ranks, (0,), pp_ranks, responses * factor, consumers)


def _sglang_dcp(p: Geometry, d: Geometry) -> list[Refusal]:
    """SGLang 0.5.23 disaggregation/common/conn.py: the decode side's checks on a prefill peer
    (CommonKVManager, "PD decode DCP ...") and the prefill side's requires_dcp_relayout. Equal
    DCP sizes pair rank for rank (at equal attention TP: otherwise a decode rank reaches a prefill rank
of another DCP rank); an unsharded MLA prefill relays out to a DCP-sharded decode;
    everything else is refused. (The equal-attention-TP assert runs only with
    --enable-kv-cache-sharding, which specplan does not plan.)"""
    if d.dcp > 1 and not d.is_mla:
        return [Refusal("decode-dcp", f"decode dcp={d.dcp} with {d.attention} attention: SGLang "
                        "raises \"PD decode DCP requires an MLA or hybrid-MLA KV pool\" "
                        "(disaggregation/common/conn.py CommonKVManager.try_ensure_parallel_info)")]
    if d.dcp > 1 and p.cp != 1:
        return [Refusal("decode-dcp", f"decode dcp={d.dcp} with prefill cp={p.cp}: SGLang raises "
                        "\"PD decode DCP currently requires prefill attention CP=1\" "
                        "(disaggregation/common/conn.py CommonKVManager.try_ensure_parallel_info)")]
    if p.dcp == d.dcp > 1 and p.attn_tp != d.attn_tp:
        return [Refusal("dcp-refused", f"prefill attention tp={p.attn_tp} dcp={p.dcp} -> decode "
                        f"attention tp={d.attn_tp} dcp={d.dcp}: equal DCP sizes pair DCP rank with "
                        "DCP rank, and ranks of a different attention TP connect across them: "
                        "SGLang raises \"PD peers must connect matching DCP ranks\" "
                        "(disaggregation/common/conn.py CommonKVManager.requires_dcp_relayout)")]
    if p.dcp != d.dcp and not (p.dcp == 1 and d.is_mla):
        return [Refusal("decode-dcp", f"prefill dcp={p.dcp} -> decode dcp={d.dcp}: SGLang raises "
                        f"\"Unsupported PD DCP topology: {p.dcp} -> {d.dcp}\" "
                        "(disaggregation/common/conn.py CommonKVManager.requires_dcp_relayout: "
                        "equal DCP sizes, or an unsharded MLA prefill relaid out to a sharded decode)")]
    return []
