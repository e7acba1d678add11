"""Pass assign_groups: each site's group family and source, both as global-rank rules.

Requires: build_round. Ensures: the draft's `families` hold every family in the order all
ranks create them (the mesh's, then `replica_stage`: one replica's ranks on one stage) and
`sites` one SiteDraft per site the round makes, with the family whose groups hold
exactly the ranks of one replica that read the site's decisions (DESIGN.md §2, §7), and the
source: the group member that is the replica's first rank on the last stage.

Readers on every stage converge over the whole replica when `pipeline.relay` is broadcast
(convergence and relay in one collective); otherwise over the last stage's replica ranks,
and the pipeline pass relays the result down.
"""

from __future__ import annotations

from specplan.engines import convention
from specplan.mesh import Family
from specplan.ir.codec import given
from specplan.ir.draft import SiteDraft
from specplan.ir.nodes import Round
from specplan.passes.build_round import planned_rounds
from specplan.passes.context import Planning
from specplan.passes.contracts import DRAFT, GRAPH

NAME = "assign_groups"
REQUIRES = (GRAPH,)
ENSURES = (DRAFT.families,
           DRAFT.sites.each.family,
           DRAFT.sites.each.source_member,
           DRAFT.sites.each.readers,
           DRAFT.sites.each.decisions)


def run(p: Planning) -> None:
    families = {f.name: f for f in p.mesh.families}
    replica = families["replica"]
    families["replica_stage"] = Family("replica_stage", replica.shape, replica.strides, 1)
    p.draft.families = families
    sites = {}
    for site in p.method.sites:
        decisions = [p.method.decision(n) for n in site.decisions]
        decisions = [d for d in decisions if p.included(d)]
        rnd = _round_of(p, site.phase)
        if not decisions or rnd is None:
            continue
        last_only = all(d.readers == "last_stage" for d in decisions)
        family = _family(p, last_only, site.phase)
        sites[site.name] = SiteDraft(
            name=site.name, round=rnd, phase=site.phase, kind=site.kind,
            decisions=tuple(d.name for d in decisions), family=family,
            source_member=_source_member(p, family),
            # Who reads the values, not who converges them: under relay column / ring a
            # site converges on the last stage only and is then relayed to the readers.
            readers="last_stage" if last_only else "all_stages",
            startup=site.startup)
    p.draft.sites = sites


def _family(p: Planning, last_stage_only: bool, phase: str) -> str:
    c = p.choices
    if c.group != "replica":
        # An engine's own group, per stage: attention TP or the whole TP block; at start-up
        # the ranks the engine gathers its readings from.
        engine = convention(p.spec.engine, p.spec.engine_version)
        return engine.startup_family(c.group) if phase == "startup" else engine.sync_family(c.group)
    if p.pp == 1:
        return "replica"
    drafts_stay = phase == "draft" and not c.relay_drafts
    if last_stage_only or c.relay != "broadcast" or drafts_stay:
        return "replica_stage"
    return "replica"


def _source_member(p: Planning, family: str) -> int:
    """Index, within each group, of the replica's first rank on the last stage."""
    if family != "replica":
        return 0  # stage-local groups: group rank 0 on the deciding (last) stage
    per_stage = given(p.draft.families)["replica"].group_size // p.pp
    return (p.pp - 1) * per_stage


def _round_of(p: Planning, phase: str) -> Round | None:
    """The round a site fires in: decode's when both have the phase (draft extend); None when
    the instance runs no round with it (a disaggregated instance's other role)."""
    if phase == "startup":
        return "startup"
    rounds = planned_rounds(p.spec)
    if "decode" in rounds and any(ph.name == phase for ph in p.method.decode):
        return "decode"
    if rounds == ("decode",):
        return None
    if rounds == ("prefill",) and not any(ph.name == phase for ph in p.method.prefill):
        return None
    return "prefill"
