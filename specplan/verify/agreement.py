"""Guarantee 1: every decision read on any rank holds its replica source's value.

For each site we follow the value: every rank of the deciding (last) stage starts with its
own value; a converge hands each group its source member's value; a relay hands each PP
column its last stage's value. Then, per replica, the ranks that read the decision must all
hold the value of one rank of their own replica. Otherwise the finding depends on why:
nothing reached a stage (ERROR), a group wider than the replica (ERROR), a converge that
leaves peers of the replica out (ERROR), an unconverged rng decision (ERROR), or agreement
that rests on bit-identical floats or host state (WARN).

The proof runs on digits (mesh/digits.py), never on a list of ranks: a rank's holder is the
rank with the digits of each converge's group overwritten by its source member's. Only a site
that may have a finding is followed rank by rank, to name its example ranks exactly.
"""

from __future__ import annotations

from collections.abc import Iterable

from specplan.mesh.digits import Digits
from specplan.verify.findings import HARDWARE_NOTES, Finding
from specplan.plan import PlanView
from specplan.plan.model import Relay, Site

SHOW = 4  # example ranks per finding


def check_agreement(view: PlanView) -> list[Finding]:
    relays = view.plan.relay
    digits = Digits.of(view.families, view.world_size)
    out: list[Finding] = []
    for site in view.plan.sites:
        if site.kind != "broadcast":
            out.extend(_host_min(view, site))
            continue
        if digits is not None and _proved(view, digits, site, relays.get(site.name)):
            continue
        holder = _follow(view, site, relays.get(site.name))
        out.extend(_judge(view, site, holder, relays.get(site.name)))
    return out


def _proved(view: PlanView, digits: Digits, site: Site, relay: Relay | None) -> bool:
    """Whether no reader misses the value, holds another replica's, or (where it matters)
    holds one of several within its replica; False when a rank-by-rank look is needed.

    The holder of rank r is r with some digits set to constants (`fixed`), defined where r's
    digits equal `needs` (it started on the last stage).
    """
    needs = dict(digits.member("pp", view.last))
    fixed: dict[int, int] = {}
    hops = [(site.family, site.source_member)] if site.converge and not site.trivial else []
    hops += [("pp", relay.source_member)] if relay is not None else []
    for family, member in hops:
        for d, v in digits.member(family, member).items():
            fixed.setdefault(d, v)
            if d in needs and needs.pop(d) != v:
                return False  # the source is on another stage than the value: nobody holds it
    readers = digits.member("pp", view.last) if site.readers == "last_stage" or view.pp == 1 else {}
    if any(readers.get(d) != v for d, v in needs.items()):
        return False  # some readers never receive it
    inside = digits.group("replica")
    if any(d not in inside for d in fixed):
        return False  # some replica takes another replica's value
    if not _split_matters(view, site):
        return True
    return all(d in fixed or d in readers or d not in inside for d in range(len(digits.sizes)))


def _split_matters(view: PlanView, site: Site) -> bool:
    """Whether ranks of one replica holding different values would be a finding."""
    if site.converge and not site.trivial:
        return True
    return any(_effective(view, site.name, d.nature) != "deterministic" for d in site.decisions)


def _follow(view: PlanView, site: Site, relay: Relay | None) -> list[int | None]:
    stage_of, last = view.stages, view.last
    holder: list[int | None] = [r if stage_of[r] == last else None for r in range(view.world_size)]
    if site.converge and not site.trivial:
        m = site.source_member
        for group in view.groups(site.family):
            value = holder[group[m]]
            for rank in group:
                holder[rank] = value
    if relay is not None:
        m = relay.source_member
        for column in view.groups("pp"):
            value = holder[column[m]]
            for rank in column:
                holder[rank] = value
    return holder


def _readers(view: PlanView, site: Site, ranks: list[int]) -> list[int]:
    if site.readers == "last_stage" or view.pp == 1:
        return [r for r in ranks if view.stages[r] == view.last]
    return ranks


def _judge(view: PlanView, site: Site, holder: list, relay: Relay | None) -> list[Finding]:
    missing, foreign, split = [], [], []
    replica_of = view.replicas
    for rep, ranks in enumerate(view.groups("replica")):
        readers = _readers(view, site, ranks)
        origins = {holder[r] for r in readers}
        missing += [r for r in readers if holder[r] is None]
        foreign += [r for r in readers if holder[r] is not None and replica_of[holder[r]] != rep]
        if len(origins - {None}) > 1:
            split.append((rep, sorted(o for o in origins if o is not None)))
    out = []
    if missing:
        out.append(_missing(view, site, missing))
    if foreign:
        out.append(_foreign(view, site, foreign, holder))
    if split:
        out.extend(_split(view, site, split))
    return out


def _f(view: PlanView, severity: str, site: Site, ranks: Iterable[int], message: str, fix: str,
       line_keys: tuple[str, ...], decision: str | None = None) -> Finding:
    names = [d.name for d in site.decisions]
    return Finding(severity=severity, site=site.name, decision=decision or ",".join(names), group=site.family,
                   ranks=tuple(sorted(ranks)[:SHOW]), round=site.round, line=view.line(*line_keys),
                   message=message, fix=fix)


def _missing(view: PlanView, site: Site, ranks: list[int]) -> Finding:
    stages = sorted({view.stages[r] for r in ranks})
    draft = site.phase == "draft"
    what = ("the first stage embeds placeholder tokens (-1) in the next round" if 0 in stages
            else "those stages commit a layout they never received")
    return _f(view, "ERROR", site, ranks,
              f"{site.name} is decided on stage {view.last} but never reaches stage(s) "
              f"{', '.join(map(str, stages))}: {what}",
              "relay drafts to every stage (pipeline.relay_drafts: true)" if draft else
              "relay the decision to every stage (pipeline.relay: broadcast | column | ring)",
              ("pipeline.relay_drafts",) if draft else ("pipeline.relay", "sync.policy"))


def _foreign(view: PlanView, site: Site, ranks: list[int], holder: list) -> Finding:
    r = ranks[0]
    src = holder[r]
    return _f(view, "ERROR", site, [r, src],
              f"{site.name} converges over {site.family}, whose groups span several replicas: "
              f"rank {r} (replica {view.replicas[r]}) takes the value of rank {src} (replica "
              f"{view.replicas[src]}), which serves other requests",
              "converge over the replica (sync.group: replica; under DP-attention attn_tp)",
              ("sync.group", "sync.policy"))


def _split(view: PlanView, site: Site, split: list) -> list[Finding]:
    rep, ranks = split[0]  # the ranks whose values a reader of this replica may hold
    if site.converge and not site.trivial:
        # Each group takes its own source's values: they differ where unconverged ones would,
        # so the severity follows the decisions' natures (rng: ERROR; float, host: WARN).
        natures = {_effective(view, site.name, d.nature) for d in site.decisions} - {"deterministic"}
        if not natures:
            return []
        return [_f(view, "ERROR" if "rng" in natures else "WARN", site, ranks,
                   f"{site.name} converges over {site.family}, which leaves ranks of replica "
                   f"{rep} outside the group: they keep their own values ({len(split)} replicas "
                   f"affected; attention-CP peers serve the same requests)"
                   + ("" if "rng" in natures else
                      ": they agree only if what each group's source computes alone "
                      "(floating-point results, host state) is identical"),
                   "converge over every rank of the replica (sync.group: replica)",
                   ("sync.group", "topology.cp"))]
    out = []
    for d in site.decisions:
        nature = _effective(view, site.name, d.nature)
        if nature == "deterministic":
            continue
        out.append(_unconverged(view, site, d.name, nature, ranks, rep))
    return out


def _effective(view: PlanView, site: str, nature: str) -> str:
    """rng draws are rank-deterministic when greedy, counter-based or lockstep-seeded."""
    b = view.plan.behaviour
    if nature == "rng" and (b.rng_is_float or site in b.lockstep_sites):
        return "float"
    return nature


def _unconverged(view: PlanView, site: Site, decision: str, nature: str, ranks: Iterable[int],
                 rep: int) -> Finding:
    keys = (f"sync.sites.{site.name}", "sync.policy")
    if nature == "rng":
        return _f(view, "ERROR", site, ranks,
                  f"{decision} draws random numbers on every rank of replica {rep} and nothing "
                  f"converges it: ranks accept different drafts, sequence lengths split and the next "
                  f"collective hangs", f"converge {site.name} (sync.sites: {{{site.name}: on}})",
                  keys, decision)
    why = "host state each rank keeps alone (per-rank corpora, free memory)" if nature == "host" else \
        "floating-point results each rank computes alone (argmax / top-k over logits)"
    notes = _hardware(view) if nature == "float" else ""  # host state breaks on any hardware
    return _f(view, "WARN", site, ranks,
              f"{decision} is not converged: ranks of replica {rep} agree only if {why} are "
              f"identical{'; ' + notes if notes else ''}",
              f"converge {site.name} (sync.sites: {{{site.name}: on}})"
              + (" or keep logits bit-identical" if nature == "float" else ""),
              keys, decision)


def _hardware(view: PlanView) -> str:
    notes = []
    device = view.plan.device
    if device in HARDWARE_NOTES:
        notes.append(HARDWARE_NOTES[device])
    if view.plan.model.dtype == "fp8":
        notes.append(HARDWARE_NOTES["fp8"])
    return "; ".join(notes)  # only what applies to this device and dtype


def _host_min(view: PlanView, site: Site) -> list[Finding]:
    if site.converge or site.trivial:
        return []
    return [_f(view, "WARN", site, [], f"{site.name} takes each rank's own free-memory reading: "
               "ranks may capture different draft graphs", f"converge {site.name} (MIN over the group)",
               (f"sync.sites.{site.name}", "sync.policy"))]
