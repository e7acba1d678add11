"""Guarantee 6: every gate is agreed over every rank of every collective it selects.

A gate (plan.json `gates`) names the family it is agreed over (null: each rank decides
alone), the site whose converge carries that agreement when one does, and the collectives
its value selects, each with its family. A gate whose every selected collective has all of
its groups inside one group of the agreement family is clean; any other selected collective
is an ERROR naming the gate, its agreement group, the collective and its group, the phase
and the engine function: ranks on both sides of the decision issue different collectives,
and a peer waits for one that never comes.

Containment is proved on digits (mesh/digits.py: a family's group is a set of rank digits)
when the families have them, else group by group.
"""

from __future__ import annotations

from specplan.mesh.digits import Digits
from specplan.plan import PlanView
from specplan.plan.model import Gate, GateCollective
from specplan.verify.findings import Finding

SHOW = 4  # example ranks per finding


def check_gates(view: PlanView) -> list[Finding]:
    digits = Digits.of(view.families, view.world_size)
    out = []
    for gate in view.plan.gates:
        family = agreement(view, gate)
        narrow = [s for s in gate.selects if not _inside(view, digits, s.family, family)]
        for group in dict.fromkeys(s.family for s in narrow):  # one finding per family
            out.append(_finding(view, gate, family, [s for s in narrow if s.family == group]))
    return out


def agreement(view: PlanView, gate: Gate) -> str | None:
    """The family the gate is agreed over in this plan: none when its carrier site does not
    converge (a sync.sites or sync.policy that turns it off)."""
    if gate.site is not None and not view.plan.site[gate.site].converge:
        return None
    return gate.family


def _inside(view: PlanView, digits: Digits | None, inner: str, outer: str | None) -> bool:
    if view.plan.family[inner].group_size == 1:
        return True  # a one-rank collective waits on no one
    if outer is None:
        return False
    if digits is not None:
        return digits.group(inner) <= digits.group(outer)
    groups = [set(g) for g in view.groups(outer)]
    return all(any(set(g) <= o for o in groups) for g in view.groups(inner))


def _finding(view: PlanView, gate: Gate, family: str | None,
             sels: list[GateCollective]) -> Finding:
    sel = sels[0]
    group = view.groups(sel.family)[0]
    size = view.plan.family[sel.family].group_size
    ops = " and ".join(s.op for s in sels)
    whats = "; ".join(s.what for s in sels)
    where = f"over {family} ({view.plan.family[family].group_size} rank(s))" if family else \
        "by no group: each rank decides alone"
    return Finding(
        severity="ERROR", gate=gate.name, group=sel.family, ranks=tuple(group[:SHOW]),
        round=gate.phase,
        message=(f"{gate.name} is agreed {where} ({gate.input.replace('_', '-')} input, "
                 f"{gate.phase}), but selects {ops} over {sel.family} ({size} ranks, e.g. "
                 f"{list(group[:SHOW])}): {whats}. Ranks on either side of it issue different "
                 f"collectives and wait on each other ({gate.function}; agreed: {gate.agreed_by})"),
        fix=(f"agree [{gate.name}] over {sel.family} or wider (behaviour: specplan plans it so; "
             "`specplan enforce` writes that plan and the launch line that runs it)"))
