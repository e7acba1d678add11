"""SGLang's rank layout: world = tp * pp, rank = tp * pp_rank + tp_rank (tp fastest).

The TP block is read twice, independently: as attn_dp x attn_cp x attn_tp (attn_tp
fastest; attn_dp = dp only with DP-attention) and as moe_dp x moe_ep x moe_tp (moe_tp
fastest). dp > 1 without DP-attention starts `dp` independent worlds.

Worked example, 8 ranks: tp=8, dp=2, dp_attention, ep=8 (attn_tp=4, moe_tp=1):
    attn_tp  [0,1,2,3] [4,5,6,7]       replicas [0..3] (source 0), [4..7] (source 4)
    moe_ep   [0..7]  (the tp group itself: ep == tp)
    attn_cp, moe_dp, moe_tp, pp: singletons
"""

from __future__ import annotations

from specplan.mesh.family import Family
from specplan.mesh.pipeline import split_sglang
from specplan.schema.model import Topology

name = "sglang"
split_layers = staticmethod(split_sglang)


def world_size(t: Topology) -> int:
    return t.tp * t.pp


def num_worlds(t: Topology) -> int:
    return 1 if t.dp_attention else t.dp


def derived(t: Topology) -> dict[str, int]:
    attn_dp = t.dp if t.dp_attention else 1
    return {
        "attn_dp": attn_dp,
        "attn_cp": t.cp,
        "attn_tp": t.tp // attn_dp // t.cp,
        "moe_ep": t.ep,
        "moe_dp": t.moe_dp,
        "moe_tp": t.tp // t.ep // t.moe_dp,
    }


def families(t: Topology) -> tuple[Family, ...]:
    """Every family in the order SGLang's initialize_model_parallel creates them."""
    d = derived(t)
    tp, pp = t.tp, t.pp
    a_dp, a_cp, a_tp = d["attn_dp"], d["attn_cp"], d["attn_tp"]
    m_dp, m_ep, m_tp = d["moe_dp"], d["moe_ep"], d["moe_tp"]
    tp_fam = Family("tp", (pp, tp), (tp, 1), 1)
    attn_cp = Family("attn_cp", (pp, a_dp, a_tp, a_cp), (tp, a_tp * a_cp, 1, a_tp), 1,
                     alias="tp" if a_cp == tp and tp > 1 else None)
    out = [
        tp_fam,
        attn_cp,
        Family("attn_tp", (pp, a_dp * a_cp, a_tp), (tp, a_tp, 1), 1,
               alias="tp" if a_tp == tp and tp > 1 else None),
        _moe_dp(t, tp_fam, attn_cp, m_dp, m_ep, m_tp),
        Family("moe_ep", (pp, m_dp, m_tp, m_ep), (tp, m_ep * m_tp, 1, m_tp), 1,
               alias="tp" if m_ep == tp and tp > 1 and t.device != "npu" else None),
        Family("moe_tp", (pp, m_dp * m_ep, m_tp), (tp, m_tp, 1), 1,
               alias="tp" if m_tp == tp and tp > 1 else None),
        Family("pp", (tp, pp), (1, tp), 1),
        Family("dcp", (pp, tp // t.dcp, t.dcp), (tp, t.dcp, 1), 1),
        replica(t),
    ]
    return tuple(out)


def _moe_dp(t: Topology, tp_fam: Family, attn_cp: Family, m_dp: int, m_ep: int, m_tp: int) -> Family:
    # CP partners share tokens before MoE, so SGLang reuses the attn_cp groups as moe_dp.
    if attn_cp.group_size > m_dp:
        return Family("moe_dp", attn_cp.shape, attn_cp.strides, 1, alias="attn_cp")
    if m_dp == t.tp and t.tp > 1:
        return Family("moe_dp", tp_fam.shape, tp_fam.strides, 1, alias="tp")
    return Family("moe_dp", (t.pp, m_ep * m_tp, m_dp), (t.tp, 1, m_ep * m_tp), 1)


def replica(t: Topology) -> Family:
    """One attn_dp index on every PP stage (DP-attention), else the whole world."""
    d = derived(t)
    block = d["attn_cp"] * d["attn_tp"]
    return Family("replica", (d["attn_dp"], t.pp, block), (block, t.tp, 1), 2)
