"""Pass insert_converges: which sites converge, from each decision's nature and sync.policy.

Requires: assign_groups. Ensures: every site says `converge`, `reason` and `trivial`;
every converged site has a converge node on each stage its family spans, spliced between
its decision nodes and the materialize nodes that read them.

Policies reproduce SGLang's SGLANG_SPEC_TP_SYNC presets for DSpark and DFlash and extend
them to every method: `safe` converges every decision that is not deterministic, `all`
every site, `rng` the start-up host sites and every rng site, `init` only the start-up host
sites, `off` none. `sync.sites` overrides single sites. A group of one rank needs no
collective, so such a converge is kept in the graph but marked trivial.
"""

from __future__ import annotations

from specplan.engines import convention
from specplan.errors import Diagnostic, PlanError
from specplan.ir import Node
from specplan.ir.codec import given
from specplan.ir.draft import SiteDraft
from specplan.passes.context import Planning
from specplan.passes.contracts import DRAFT

NAME = "insert_converges"
REQUIRES = (DRAFT.families, DRAFT.sites.each.family)
ENSURES = (DRAFT.sites.each.converge, DRAFT.sites.each.reason, DRAFT.sites.each.trivial)


def run(p: Planning) -> None:
    _check_overrides(p)
    for site in given(p.draft.sites).values():
        site.converge, site.reason = _decide(p, site)
        site.trivial = given(p.draft.families)[site.family].group_size == 1
        if site.converge:
            _splice(p, site)


def _decide(p: Planning, entry: SiteDraft) -> tuple[bool, str]:
    name = entry.name
    held = convention(p.spec.engine, p.spec.engine_version).engine_held(p.method.site(name))
    if held is not None:
        return True, held
    override = p.spec.sync.sites.get(name)
    if override is not None:
        return override == "on", f"sync.sites sets {name}: {override}"
    engine = p.choices.engine_sites
    if engine is not None:
        on = engine[name]
        return on, f"engine {p.spec.engine}: {'converges' if on else 'does not converge'} {name} by default"
    site = p.method.site(name)
    natures = {p.method.decision(d).nature for d in entry.decisions}
    policy = p.spec.sync.policy
    if policy == "safe":
        varying = sorted(natures - {"deterministic"})
        return bool(varying), f"policy safe: {'/'.join(varying) or 'deterministic'} decisions"
    if policy == "all":
        return True, "policy all"
    if policy == "off":
        return False, "policy off"
    return policy in site.presets, f"policy {policy}: site {'in' if policy in site.presets else 'not in'} the preset"


def _check_overrides(p: Planning) -> None:
    known = {s.name for s in p.method.sites}
    bad = [Diagnostic(*p.spec.where("sync", "sites", name), f"sync.sites.{name}",
                      f"unknown site {name!r} for method {p.method.name!r}; sites: {', '.join(sorted(known))}")
           for name in p.spec.sync.sites if name not in known]
    if bad:
        raise PlanError(bad)


def _splice(p: Planning, entry: SiteDraft) -> None:
    g, rnd, name = p.graph, entry.round, entry.name
    family = entry.family
    stages = range(p.pp) if family == "replica" else [p.last_stage]  # others live on one stage
    makers = [n for n in g.nodes("decision", round=rnd) if n.attr("site") == name]
    for s in stages:
        conv = g.add(Node("converge", name, rnd, entry.phase, s, line=p.line("sync", "policy"),
                          attrs=(("decisions", entry.decisions), ("family", family),
                                 ("order", makers[0].attr("order") + 1),
                                 ("source_member", entry.source_member))))
        for maker in makers:
            g.connect(maker, conv, (maker.name,))
            for reader in [r for r in g.successors(maker) if r.stage == s and r.kind == "materialize"]:
                carries = g.disconnect(maker, reader)
                g.connect(conv, reader, carries)
