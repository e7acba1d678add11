"""The data `specplan explain DEPLOYMENT --picture kv` draws: both instances' ranks (stage and a
label) and one link per (prefill rank, decode rank) the handoff pairs."""

from __future__ import annotations

from itertools import product

from specplan.deploy.geometry import Geometry
from specplan.deploy.handoff import Handoff
from specplan.deploy.load import InstancePair


def kv_picture_data(dep: InstancePair, h: Handoff) -> dict:
    p, d = h.prefill, h.decode
    return {"name": dep.name,
            "title": f"{dep.name}: {dep.connector}, rules {h.rules.function}",
            "prefill": _instance(p, "p"), "decode": _instance(d, "d"), "links": links(h)}


def _instance(g: Geometry, tag: str) -> dict:
    t = g.spec.topology
    title = (f"{g.role} {g.spec.name} ({g.engine}): attn_tp {g.attn_tp} x pp {t.pp}"
             + (f" x dp {g.dp}" if g.dp > 1 else ""))
    ranks = [{"rank": r, "stage": g.pp_of[r],
              "label": [f"{tag}{r}", f"dp{g.dp_of[r]} tp{g.tp_of[r]} pp{g.pp_of[r]}"]}
             for r in range(g.num_ranks)]
    return {"title": title, "ranks": ranks}


def links(h: Handoff) -> list[dict]:
    """(prefill global rank, decode rank, stage, layers) of every pull the plan holds."""
    p = h.prefill
    index: dict[tuple[int, int, int, int], int] = {}
    for r in range(p.num_ranks):
        index.setdefault((p.dp_of[r], p.tp_of[r], p.cp_of[r], p.pp_of[r]), r)
    out = []
    for e in h.entries:
        sources = product(e["prefill_tp_ranks"], e["prefill_cp_ranks"], e["prefill_pp_ranks"])
        for tp, cp, pp in sources:
            rank = index[(e["prefill_dp_rank"], tp, cp, pp)]
            start, end = p.stages[pp]
            out.append({"prefill": rank, "decode": e["decode_rank"], "stage": pp,
                        "layers": f"[{start}, {end})"})
    return out
