"""Pass dp_agreement: DP ranks whose collectives span replicas run in lockstep.

Requires: pin_widths. Ensures, when replicas share collectives (sglang DP-attention: the
MLP / MoE runs over the whole TP block; vllm dp > 1 with MoE: expert parallel spans the dp
ranks), `sections["dp_agreement"]`: the per-rank token-count exchange every round starts
with (sglang: an all-gather of each rank's count vector over the tp family, attn-TP rank 0
of each replica authoritative; vllm: num_tokens_across_dp over the dp family), and the
forwards every DP rank runs per round, idle ranks with dummy passes. The graph gains that
exchange as a converge node every stage's first decode compute waits on.
"""

from __future__ import annotations

from specplan.ir import Node
from specplan.methods.base import eval_dim
from specplan.passes.context import Planning

NAME = "dp_agreement"
COUNT_INTS = 7  # tokens, forward mode, cuda-graph ok, extend-in-batch, ... per rank


def run(p: Planning) -> None:
    family, group_size = _family(p)
    if family is None:
        p.graph.sections["dp_agreement"] = None
        return
    forwards = {}
    for phase in p.method.decode:
        if phase.compute:
            forwards[phase.name] = eval_dim(phase.forwards, p.symbols)
    ints = COUNT_INTS if p.spec.engine == "sglang" else 1
    p.graph.sections["dp_agreement"] = {
        "family": family,
        "op": "all_gather" if p.spec.engine == "sglang" else "all_reduce_sum",
        "ints_per_rank": ints,
        "bytes": 4 * ints * group_size,
        "forwards_per_round": forwards,
        "idle_ranks": p.choices.idle_ranks,  # dummy: run every forward and collective
        "why": "MoE and MLP collectives span replicas: a DP rank that skips a forward "
               "leaves the others waiting",
    }
    _graph(p, family)


def _family(p: Planning) -> tuple[str | None, int]:
    t = p.spec.topology
    if p.spec.engine == "sglang" and t.dp_attention and t.dp > 1:
        return "tp", t.tp
    if p.spec.engine == "vllm" and t.dp > 1 and p.spec.model.moe is not None:
        return "dp", t.dp
    return None, 0


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
