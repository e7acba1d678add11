"""vLLM's rank layout: ranks = arange(world).reshape(DP, PP, PCP, TP); a family's groups
come from moving its axis last (ExternalDP is 1 here).

Global rank = ((dp * PP + pp) * PCP + pcp) * TP + tp. DCP groups sit inside TP, but span
the PCP ranks when pcp > 1 (vLLM 0.33 moves PCP next to TP before chunking).

Worked example, 8 ranks: tp=2, pp=2, cp(pcp)=2:
    tp  [0,1] [2,3] [4,5] [6,7]        pcp [0,2] [1,3] [4,6] [5,7]
    pp  [0,4] [2,6] [1,5] [3,7]        (order: tp index, then pcp index)
    replica [0..7], source 4 (first rank of the last stage)
"""

from __future__ import annotations

from specplan.mesh.family import Family
from specplan.mesh.pipeline import split_vllm
from specplan.schema.model import Topology

name = "vllm"
split_layers = staticmethod(split_vllm)


def world_size(t: Topology) -> int:
    return t.dp * t.pp * t.cp * t.tp


def num_worlds(t: Topology) -> int:
    return 1


def derived(t: Topology) -> dict[str, int]:
    return {"pcp": t.cp}


def families(t: Topology, is_moe: bool) -> tuple[Family, ...]:
    """Every family in the order vLLM's initialize_model_parallel creates them."""
    dp, pp, pcp, tp = t.dp, t.pp, t.cp, t.tp
    s_tp, s_pcp, s_pp, s_dp = 1, tp, tp * pcp, tp * pcp * pp
    out = [
        Family("tp", (dp, pp, pcp, tp), (s_dp, s_pp, s_pcp, s_tp), 1),
        _dcp(t),
        Family("pcp", (dp, pp, tp, pcp), (s_dp, s_pp, s_tp, s_pcp), 1),
        Family("pp", (dp, tp, pcp, pp), (s_dp, s_tp, s_pcp, s_pp), 1),
        Family("dp", (tp, pp, pcp, dp), (s_tp, s_pp, s_pcp, s_dp), 1),
    ]
    if is_moe:
        out.append(Family("ep", (pp, dp, pcp, tp), (s_pp, s_dp, s_pcp, s_tp), 3))
    out.append(replica(t))
    return tuple(out)


def _dcp(t: Topology) -> Family:
    dp, pp, pcp, tp, dcp = t.dp, t.pp, t.cp, t.tp, t.dcp
    s_pcp, s_pp, s_dp = tp, tp * pcp, tp * pcp * pp
    if pcp == 1:
        return Family("dcp", (dp * pp, tp // dcp, dcp), (s_pp, dcp, 1), 1)
    # chunks of `dcp` consecutive ranks in (tp, pcp) order
    if pcp % dcp == 0:
        return Family("dcp", (dp, pp, tp, pcp // dcp, dcp), (s_dp, s_pp, 1, s_pcp * dcp, s_pcp), 1)
    a = dcp // pcp
    return Family("dcp", (dp, pp, tp // a, a, pcp), (s_dp, s_pp, a, 1, s_pcp), 2)


def replica(t: Topology) -> Family:
    """One dp index (its pcp x tp ranks) on every PP stage."""
    block = t.pp * t.cp * t.tp
    return Family("replica", (t.dp, t.pp, t.cp * t.tp), (block, t.cp * t.tp, 1), 2)
