"""Guarantees 4 and 5: one global group order; layer and tap ids; pipeline payloads; DP idling."""

from __future__ import annotations

from collections.abc import Sequence

from specplan.mesh.digits import partitions
from specplan.mesh.pipeline import tap_owner
from specplan.verify.findings import Finding
from specplan.plan import PlanView
from specplan.plan.model import Stage


def check_structure(view: PlanView) -> list[Finding]:
    return [*_families(view), *_draft_layers(view), *_taps(view), *_widths(view), *_dp(view)]


def _families(view: PlanView) -> list[Finding]:
    out, seen = [], []
    for fam in view.plan.families:
        name, alias = fam.name, fam.rule.alias
        if name in seen:
            out.append(_err(view, name, f"group family {name} is listed twice: ranks would create "
                            "its groups twice and disagree on the order of torch.distributed.new_group",
                            "list every family once"))
        if alias and alias not in seen:
            out.append(_err(view, name, f"group family {name} reuses {alias}, which is not created before it",
                            "create aliased families first"))
        seen.append(name)
        if not _partition(view, name):
            out.append(_err(view, name, f"the groups of {name} do not partition the {view.world_size} ranks",
                            "regenerate the plan"))
    used = {s.family for s in view.plan.sites} | {
        op.family for c in view.plan.rank_classes for ops in c.program.values() for op in ops if op.family}
    for name in sorted(used - set(seen)):
        out.append(_err(view, name, f"family {name} is used but never created", "regenerate the plan"))
    return out


def _partition(view: PlanView, name: str) -> bool:
    """Whether the groups of `name` partition the world: by its rule's strides (a mixed
    radix), or, for a rule whose shape and strides do not pair up, by listing its groups."""
    fam = view.families[name]
    if len(fam.shape) == len(fam.strides) and 0 < fam.group_ndim <= len(fam.shape):
        return partitions(fam, view.world_size)
    return sorted(r for g in view.groups(name) for r in g) == list(range(view.world_size))


def _err(view: PlanView, group: str, message: str, fix: str, line_key: str = "engine") -> Finding:
    return Finding(severity="ERROR", group=group, line=view.line(line_key), message=message, fix=fix)


def _draft_layers(view: PlanView) -> list[Finding]:
    drafter = view.plan.pipeline.drafter
    if not drafter:
        return []
    stages = view.plan.pipeline.stages
    clashes = []
    for lid in drafter.layer_ids:
        for st in stages:
            if st.start_layer <= lid < st.end_layer:
                clashes.append((lid, st))
    if not clashes:
        return []
    lid, st = clashes[0]
    return [Finding(severity="ERROR", line=view.line("pipeline.draft_layer_ids"),
                    message=f"draft-layer id {lid} collides with target layer {lid} of stage {st.pp_rank} "
                    f"[{st.start_layer}, {st.end_layer}): the drafter and the target share a KV and "
                    f"weight namespace, so one overwrites the other and peers route by the wrong name",
                    fix="number draft layers after the target's total layers "
                    "(pipeline.draft_layer_ids: global)")]


def _taps(view: PlanView) -> list[Finding]:
    pipe = view.plan.pipeline
    out = []
    for entry in pipe.taps:
        tap, producers = entry.tap, entry.producers
        if len(producers) != 1:
            what = "no stage" if not producers else "stages " + ", ".join(map(str, producers))
            out.append(Finding(severity="ERROR", decision=f"tap {tap}", group="pp", round="decode",
                               line=view.line("pipeline.tap_ids", "speculative.aux_layers"),
                               message=f"tap {tap} is produced by {what}; exactly one stage must produce it",
                               fix="number taps globally (pipeline.tap_ids: global)"))
        elif _owner(pipe.stages, tap) != producers[0]:
            owner = _owner(pipe.stages, tap)
            out.append(Finding(severity="ERROR", decision=f"tap {tap}", group="pp", round="decode",
                               line=view.line("pipeline.tap_ids", "speculative.aux_layers"),
                               message=f"tap {tap} is produced on stage {producers[0]}, but the residual "
                               f"entering layer {tap} is on stage {owner}: the drafter reads another layer's "
                               f"hidden state", fix="number taps globally (pipeline.tap_ids: global)"))
        elif pipe.aux_routing == "dropped" and producers[0] != view.last:
            out.append(Finding(severity="ERROR", decision=f"tap {tap}", group="pp", round="decode",
                               line=view.line("pipeline.aux_routing", "speculative.aux_layers"),
                               message=f"tap {tap} is produced on stage {producers[0]} but nothing carries it "
                               f"to the drafter on stage {view.last}: the drafter reads fewer taps than it "
                               f"was trained on",
                               fix="route taps to the last stage (pipeline.aux_routing: chain)"))
    return out


def _owner(stages: Sequence[Stage], tap: int) -> int:
    return tap_owner(tap, [(st.start_layer, st.end_layer) for st in stages])


def _widths(view: PlanView) -> list[Finding]:
    relay = view.plan.pipeline.relay
    if relay.payload_width != "agreed" or not relay.sites:
        return []
    return [Finding(severity="INFO", site=r.site, group="pp", round=r.round,
                    line=view.line("pipeline.payload_width"),
                    message=f"{r.site} relays at a width both ends derive from the same scheduler inputs "
                    "(as vLLM 0.33): safe while those inputs agree",
                    fix="pin the width to stay safe regardless")
            for r in relay.sites]


def _dp(view: PlanView) -> list[Finding]:
    dp = view.plan.dp_agreement
    if not dp or dp.idle_ranks != "skip":
        return []
    return [Finding(severity="ERROR", group=dp.family, round="decode",
                    line=view.line("sync.idle_ranks"),
                    message=f"an idle DP rank skips the forwards and collectives its peers run over "
                    f"{dp.family} (MoE and MLP collectives span replicas): the busy ranks wait forever",
                    fix="idle ranks run dummy passes (sync.idle_ranks: dummy)")]
