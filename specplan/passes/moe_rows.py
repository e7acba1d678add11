"""Pass moe_rows: MoE under DP-attention, where row ownership changes around the experts.

Requires: pipeline_stages. Ensures the draft's `moe` for MoE models (families from the
engine convention's moe_layout) and, where it splits rows (SGLang with DP-attention,
attn_tp > 1 and an all-to-all backend, `model.moe.a2a: deepep`), the row split and
regather of reference/sglang.md §5.3 as graph nodes around every target compute:
each attention-TP rank dispatches its 1/attn_tp slice of the rows (Materialize), the
all-to-all runs over the tp family (DeepEP uses the full TP group), and an all-gather over
attn_tp restores the row layout the next layer needs (Compute).
"""

from __future__ import annotations

from specplan.engines import convention
from specplan.ir import Node
from specplan.ir.records import MoeRows
from specplan.passes.context import Planning
from specplan.passes.contracts import DRAFT

NAME = "moe_rows"
REQUIRES = (DRAFT.pipeline.stages,)
ENSURES = (DRAFT.moe,)


def run(p: Planning) -> None:
    moe = p.spec.model.moe
    if moe is None:
        p.draft.moe = None
        return
    conv = convention(p.spec.engine, p.spec.engine_version)
    layout = conv.moe_layout(p.spec)
    rows = p.spec.runtime.max_batch * p.spec.speculative.verify_width
    split = layout.row_split
    a_tp = conv.attention_tp(p.spec.topology) if split else 1
    p.draft.moe = MoeRows(
        a2a=moe.a2a,
        dispatch_family=layout.dispatch_family,
        row_split=split,
        gather_family="attn_tp" if split else None,
        rows_per_rank=-(-rows // a_tp),
        gather_bytes_per_layer=rows * p.spec.model.hidden_size * p.act_bytes if split else 0,
    )
    if split:
        _graph(p)


def _graph(p: Planning) -> None:
    g = p.graph
    for verify in [n for n in g.nodes("compute") if n.attr("compute") in ("target_verify", "target_prefill")]:
        after = [n for n in g.successors(verify) if n.stage == verify.stage]
        order = verify.attr("order")
        split = g.add(Node("materialize", f"moe_row_split_{verify.name}", verify.round, verify.phase,
                           verify.stage, attrs=(("derives", ("row_slice",)), ("order", order),
                                                ("reads", ()))))
        moe = g.add(Node("compute", f"moe_{verify.name}", verify.round, verify.phase, verify.stage,
                         attrs=(("compute", "moe_dispatch_combine"), ("family", "tp"),
                                ("order", order), ("then_gather", "attn_tp"))))
        g.connect(verify, split)
        g.connect(split, moe)
        for nxt in after:
            if nxt.kind != "compute" or nxt.stage != verify.stage:
                g.connect(moe, nxt, g.disconnect(verify, nxt))
