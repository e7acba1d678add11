"""Pass schedule: each rank class's ordered collectives for one round of each kind.

Requires: moe_rows. Ensures the draft's `rank_classes`: ranks that run the same program
(here: the ranks of one pipeline stage) share one program, stored once with the rule that
selects its ranks, so a plan grows with classes, not ranks; and `in_flight`,
the pp rounds a pipeline keeps in flight. Ops name a family (the rank's own group in it),
bytes fixed at compile time, and the boundary or site they serve.
"""

from __future__ import annotations

from specplan.ir.codec import Absent, given
from specplan.ir.draft import ABSENT, BoundaryDraft
from specplan.ir.nodes import Node, Round
from specplan.ir.records import Op, Program, RankClass
from specplan.methods.base import eval_dim
from specplan.passes.context import Planning
from specplan.passes.contracts import DRAFT

NAME = "schedule"
REQUIRES = (DRAFT.moe, DRAFT.dp_agreement, DRAFT.boundaries.each.buffer_bytes,
            DRAFT.pipeline.relay.sites.each.buffer_bytes)
ENSURES = (DRAFT.rank_classes.each.program, DRAFT.in_flight)
IDLE_SKIPS = ("forward", "all_to_all", "all_gather")


def run(p: Planning) -> None:
    classes: list[RankClass] = []
    order = p.graph.topological()  # once: every stage's program is a filter of this order
    for s in range(p.pp):
        mine = [n for n in order if n.stage == s]
        program = Program(*(_program(p, rnd, s, mine) for rnd in ("startup", "prefill", "decode")))
        idle: Program | Absent = ABSENT
        if p.draft.dp_agreement and p.choices.idle_ranks == "skip":
            # An idle DP rank that skips its forwards also skips every collective inside them.
            idle = Program(*(tuple(o for o in ops if o.op not in IDLE_SKIPS)
                             for ops in (program.startup, program.prefill, program.decode)))
        classes.append(RankClass(id=s, rule={"pp": s}, program=program, idle_program=idle))
    p.draft.rank_classes = classes
    p.draft.in_flight = p.pp


def _program(p: Planning, rnd: Round, stage: int, nodes: list[Node]) -> tuple[Op, ...]:
    sites, boundaries = given(p.draft.sites), given(p.draft.boundaries)
    ops: list[Op] = []
    seen: set[int] = set()
    for node in nodes:
        if node.round != rnd:
            continue
        if node.kind == "compute":
            ops.extend(_compute_ops(p, node))
        elif node.kind == "converge" and node.name == "dp_token_counts":
            dp = given(p.draft.dp_agreement)
            assert dp is not None, "a dp_token_counts node without the draft's dp_agreement"
            ops.append(Op(op=dp.op, family=dp.family, bytes=dp.bytes, what="dp_token_counts"))
        elif node.kind == "converge" and node.name.startswith("relay_"):
            ops.append(_relay_op(p, node, stage))
        elif node.kind == "converge":
            b = sites[node.name].boundary
            if b is None or b in seen:
                continue
            seen.add(b)
            bd = boundaries[b]
            # A dynamic sender (the last stage) sends its actual width, known only at run time.
            width = None if _dynamic_sender(p, bd, stage) else bd.buffer_bytes
            ops.append(Op(op=bd.op, family=bd.family, bytes=width, boundary=b,
                          source_member=bd.source_member, sites=tuple(bd.sites)))
    return tuple(ops)


def _dynamic_sender(p: Planning, boundary: BoundaryDraft, stage: int) -> bool:
    """payload_width: dynamic makes the deciding stage's payload to other stages unpinned."""
    crosses_stages = boundary.family == "replica" and p.pp > 1
    return (p.choices.payload_width == "dynamic" and crosses_stages and stage == p.last_stage
            and boundary.op == "broadcast")


def _relay_op(p: Planning, node: Node, stage: int) -> Op:
    relay = next(r for r in given(p.draft.pipeline).relay.sites if f"relay_{r.site}" == node.name)
    last = p.pp - 1
    recv_from: int | None | Absent = ABSENT
    send_to: int | None | Absent = ABSENT
    if relay.mode == "ring":
        recv_from = None if stage == last else (last if stage == 0 else stage - 1)
        send_to = None if stage == p.pp - 2 else (0 if stage == last else stage + 1)
    # The sender's actual width, known only at run time, where the width is dynamic.
    width = None if relay.width == "dynamic" and stage == last else relay.buffer_bytes
    return Op(op="broadcast" if relay.mode == "column" else "ring", family="pp", bytes=width,
              site=relay.site, source_member=last, recv_from=recv_from, send_to=send_to)


def _compute_ops(p: Planning, node: Node) -> list[Op]:
    kind = node.attr("compute")
    if kind == "moe_dispatch_combine":
        moe = given(p.draft.moe)
        assert moe is not None, "a moe_dispatch_combine node without the draft's moe rows"
        return [Op(op="all_to_all", family=moe.dispatch_family, what="moe_dispatch_combine",
                        per_layer=True),
                Op(op="all_gather", family="attn_tp", bytes=moe.gather_bytes_per_layer,
                        what="moe_row_gather", per_layer=True)]
    ops = []
    staged = kind in ("target_verify", "target_prefill")
    rows = p.spec.runtime.max_batch * eval_dim(node.attr("tokens_per_request", "0"), p.symbols)
    hand = 2 * rows * p.spec.model.hidden_size * p.act_bytes
    taps = _chain_tap_bytes(p, node.stage - 1, rows) if kind == "target_verify" else 0
    if staged and node.stage > 0:
        ops.append(Op(op="recv", family="pp", peer_member=node.stage - 1,
                           bytes=hand + taps, what=f"{node.name}_handoff"))
    forwards = eval_dim(node.attr("forwards", "1"), p.symbols)
    if forwards:
        ops.append(Op(op="forward", compute=kind, family="tp", count=forwards, rows=rows))
    if staged and node.stage < p.pp - 1:
        out_taps = _chain_tap_bytes(p, node.stage, rows) if kind == "target_verify" else 0
        ops.append(Op(op="send", family="pp", peer_member=node.stage + 1,
                           bytes=hand + out_taps, what=f"{node.name}_handoff"))
    if kind == "target_verify" and given(p.draft.pipeline).aux_routing == "direct":
        ops.extend(_direct_tap_ops(p, node.stage, rows))
    return ops


def _chain_tap_bytes(p: Planning, upto: int, rows: int) -> int:
    if p.choices.aux_routing != "chain" or upto < 0:
        return 0
    taps = sum(len(s.taps) for s in p.mesh.stages[: upto + 1])
    return taps * rows * p.spec.model.hidden_size * p.act_bytes


def _direct_tap_ops(p: Planning, stage: int, rows: int) -> list[Op]:
    per_tap = rows * p.spec.model.hidden_size * p.act_bytes
    last = p.pp - 1
    if stage < last and p.mesh.stages[stage].taps:
        return [Op(op="send", family="pp", peer_member=last,
                        bytes=len(p.mesh.stages[stage].taps) * per_tap, what="taps_direct")]
    if stage == last:
        return [Op(op="recv", family="pp", peer_member=s.pp_rank, bytes=len(s.taps) * per_tap,
                        what="taps_direct") for s in p.mesh.stages[:-1] if s.taps]
    return []
