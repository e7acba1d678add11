"""Pass dp_agreement: DP ranks whose collectives span replicas run in lockstep.

Requires: pin_widths. Ensures, when replicas share collectives (the engine convention's
dp_agreement: SGLang DP-attention, vLLM dp > 1 with MoE), the draft's `dp_agreement`: the
per-rank token-count exchange every round starts with, its family, op and ints per rank,
and the forwards every DP rank runs per round, idle ranks with dummy passes. The graph gains that
exchange as a converge node every stage's first decode compute waits on.
"""

from __future__ import annotations

from specplan.engines import convention
from specplan.ir import Node
from specplan.ir.records import DpAgreement
from specplan.methods.base import eval_dim
from specplan.passes.context import Planning
from specplan.passes.contracts import DRAFT

NAME = "dp_agreement"
REQUIRES = (DRAFT.boundaries.each.layout,)
ENSURES = (DRAFT.dp_agreement,)


def run(p: Planning) -> None:
    agreement = convention(p.spec.engine, p.spec.engine_version).dp_agreement(p.spec)
    if agreement is None:
        p.draft.dp_agreement = None
        return
    forwards = {}
    for phase in p.method.decode:
        if phase.compute:
            forwards[phase.name] = eval_dim(phase.forwards, p.symbols)
    ints = agreement.ints_per_rank
    p.draft.dp_agreement = DpAgreement(
        family=agreement.family,
        op=agreement.op,
        ints_per_rank=ints,
        bytes=4 * ints * agreement.group_size,
        forwards_per_round=forwards,
        idle_ranks=p.choices.idle_ranks,  # dummy: run every forward and collective
        why="MoE and MLP collectives span replicas: a DP rank that skips a forward "
            "leaves the others waiting",
    )
    _graph(p, agreement.family)


def _graph(p: Planning, family: str) -> None:
    g = p.graph
    for s in range(p.pp):
        first = next((n for n in g.nodes("compute", round="decode", stage=s)), None)
        if first is None:
            continue
        counts = g.add(Node("decision", "dp_num_tokens", "decode", "dp_sync", s,
                            attrs=(("dtype", "int32"), ("nature", "host"), ("order", 1),
                                   ("readers", "all_stages"), ("shape", ("ints_per_rank",)),
                                   ("site", "dp_token_counts"))))
        conv = g.add(Node("converge", "dp_token_counts", "decode", "dp_sync", s,
                          attrs=(("decisions", ("dp_num_tokens",)), ("family", family),
                                 ("order", 2), ("source_member", -1))))
        pad = g.add(Node("materialize", "dp_padding", "decode", "dp_sync", s,
                         attrs=(("derives", ("global_num_tokens", "idle_dummy_pass")), ("order", 3),
                                ("reads", ("dp_num_tokens",)))))
        g.connect(counts, conv, ("dp_num_tokens",))
        g.connect(conv, pad, ("dp_num_tokens",))
        g.connect(pad, first)
