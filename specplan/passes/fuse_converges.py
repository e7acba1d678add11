"""Pass fuse_converges: converges that share group and source and do not depend on each
other become one collective (a converge boundary).

Requires: insert_converges. Ensures: the draft's `boundaries`, a list in round order, each
with an id, its round, family, source member, op and the sites it carries (in the method's
order); every converged, non-trivial site names its boundary. Where two consecutive
boundaries of one family stay apart, `unfused` gives the dependency path that
forces it (site A's converge reaches site B's decision through compute).
"""

from __future__ import annotations

from specplan.ir import node_id
from specplan.ir.codec import given
from specplan.ir.draft import BoundaryDraft, SiteDraft
from specplan.ir.records import Unfused
from specplan.passes.context import Planning
from specplan.passes.contracts import DRAFT

NAME = "fuse_converges"
REQUIRES = (DRAFT.sites.each.converge, DRAFT.sites.each.trivial)
ENSURES = (DRAFT.boundaries.each.sites, DRAFT.boundaries.each.source_member, DRAFT.unfused)


def run(p: Planning) -> None:
    live = [e for e in given(p.draft.sites).values() if e.converge and not e.trivial]
    live.sort(key=lambda e: (_round_rank(e.round), _order(p, e.name)))
    boundaries: list[BoundaryDraft] = []
    unfused: list[Unfused] = []
    for entry in live:
        target = _fusable(p, boundaries, entry, unfused)
        if target is None:
            target = BoundaryDraft(id=len(boundaries), round=entry.round, family=entry.family,
                                   source_member=entry.source_member,
                                   op="all_reduce_min" if entry.kind == "min" else "broadcast",
                                   sites=[])
            boundaries.append(target)
        target.sites.append(entry.name)
        entry.boundary = target.id
    p.draft.boundaries = boundaries
    p.draft.unfused = unfused


def _fusable(p: Planning, boundaries: list[BoundaryDraft], entry: SiteDraft,
             unfused: list[Unfused]) -> BoundaryDraft | None:
    same = [b for b in boundaries if b.round == entry.round and b.family == entry.family
            and b.source_member == entry.source_member and b.op == "broadcast"
            and entry.kind == "broadcast"]
    if not same:
        return None
    last = same[-1]
    for other in last.sites:
        path = _dependency(p, other, entry)
        if path:
            unfused.append(Unfused(after=other, before=entry.name, family=entry.family,
                                        dependency=tuple(path)))
            return None
    return last


def _dependency(p: Planning, earlier: str, entry: SiteDraft) -> list[str] | None:
    """Node ids on a path from `earlier`'s converge to a decision of `entry`, if any."""
    g, rnd, last = p.graph, entry.round, p.last_stage
    src = node_id("converge", rnd, earlier, last)
    for decision in entry.decisions:
        dst = node_id("decision", rnd, decision, last)
        if g.has(src) and g.has(dst):
            path = g.path(src, dst)
            if path:
                return [n.id for n in path]
    return None


def _order(p: Planning, site: str) -> int:
    for n in p.graph.nodes("converge"):
        if n.name == site:
            order: int = n.attr("order")
            return order
    return 0


def _round_rank(rnd: str) -> int:
    return {"startup": 0, "prefill": 1, "decode": 2}[rnd]
