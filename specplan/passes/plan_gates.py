"""Pass plan_gates: every gate the engine's code takes, and the group that agrees it.

Requires: assign_groups. Ensures: the draft's `gates`, one per gate the spec's engine declares
for its method and topology (engines/<engine>/gates.py), in declaration order, each with the
collectives it selects and the family it is agreed over.

`behaviour: engine` keeps the engine's own agreement, as its rows state it. specplan's own
plan agrees every gate over the union of the families it selects (the smallest family whose
groups hold every group of every selected collective), DESIGN.md §7 item 6:
- a start-up gate rides its carrier site (a MIN at start-up), whose family is widened to the
  union here, before insert_converges sizes and fuses it;
- a per-round gate rides the DP token-count exchange when that covers the union (its value
  is known before the round's first forward, as the engine's own exchange carries it);
- a per-round gate the engine agrees by its own exchange (no carrier site, none a sync policy
  turns off) over every group it selects keeps that agreement;
- else its carrier site, widened the same way, or, without one, a converge of its own.
A gate with none of these is a planner bug (IRError), not a plan that leaves it unagreed.
"""

from __future__ import annotations

from specplan.engines import convention
from specplan.engines.gates import GateUse
from specplan.ir import IRError
from specplan.ir.codec import given
from specplan.ir.records import Gate, GateCollective
from specplan.mesh import Family
from specplan.passes.context import Planning
from specplan.passes.contracts import DRAFT

NAME = "plan_gates"
REQUIRES = (DRAFT.families, DRAFT.sites.each.family)
ENSURES = (DRAFT.gates,)


def run(p: Planning) -> None:
    engine = convention(p.spec.engine, p.spec.engine_version)
    uses = engine.gates(p.spec, p.choices)
    if p.choices.behaviour == "engine":
        p.draft.gates = [_record(u, u.family, u.agreed_by, _engine_site(p, u)) for u in uses]
        return
    dp = engine.dp_agreement(p.spec)
    p.draft.gates = [_specplan(p, u, dp.family if dp is not None else None) for u in uses]


def _engine_site(p: Planning, use: GateUse) -> str | None:
    """The engine's agreement of a start-up gate rides its carrier site (a SpecTpSync MIN
    site, which sync.sites may turn off) when it agrees the gate at all; a per-round gate's
    agreement is what its row states."""
    if use.phase != "startup" or use.family is None or use.carrier not in given(p.draft.sites):
        return None
    return use.carrier


def _specplan(p: Planning, use: GateUse, dp_family: str | None) -> Gate:
    families = given(p.draft.families)
    union = union_family(families, [s.family for s in use.selects])
    if use.phase != "startup" and dp_family is not None and _inside(families, union, dp_family):
        return _record(use, dp_family, f"specplan: the DP token-count exchange over {dp_family} "
                       "carries it, before the round's first forward", None)
    if use.carrier is None and use.family is not None and _inside(families, union, use.family):
        # The engine agrees it by its own exchange (no site a sync policy turns off), over
        # every group it selects: the plan keeps that agreement.
        return _record(use, use.family, f"kept: {use.agreed_by}", None)
    if use.carrier is None:  # no site carries it: a converge of its own
        return _record(use, union, f"specplan: a converge of its own over {union}, before the "
                       "collectives it selects", None)
    site = given(p.draft.sites).get(use.carrier or "")
    if site is None:
        raise IRError(f"pass {NAME}: gate {use.name} has no carrier in specplan's plan "
                      f"(site {use.carrier!r}, no DP token-count exchange over {union})")
    if _inside(families, union, site.family):
        union = site.family  # its own family already holds every selected group: kept
    else:
        site.family, site.source_member = union, 0
    how = "a start-up MIN" if use.phase == "startup" else "a converge"
    return _record(use, union, f"specplan: {how} over {union} (site {site.name})", site.name)


def union_family(families: dict[str, Family], selected: list[str]) -> str:
    """The smallest family whose groups hold every group of each `selected` family (the
    first such in creation order among equals), or the first selected when none does."""
    by_size = sorted(families.values(), key=lambda f: f.group_size)  # stable: creation order
    for fam in by_size:
        if all(_inside(families, s, fam.name) for s in selected):
            return fam.name
    return selected[0]


def _inside(families: dict[str, Family], inner: str, outer: str) -> bool:
    """Whether every group of `inner` lies inside one group of `outer`."""
    groups = [set(g) for g in families[outer].groups()]
    return all(any(set(g) <= o for o in groups) for g in families[inner].groups())


def _record(use: GateUse, family: str | None, how: str, site: str | None) -> Gate:
    return Gate(name=use.name, phase=use.phase, input=use.input, function=use.function,
                family=family, agreed_by=how, site=site,
                selects=tuple(GateCollective(op=s.op, family=s.family, what=s.what)
                              for s in use.selects),
                doc=use.doc)
