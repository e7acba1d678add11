"""Pass pipeline_stages: drafter placement, taps, tap routing and decision relays under PP.

Requires: dp_agreement. Ensures the draft's `pipeline`:
- the drafter on the last stage with its own pipeline size 1, tensor width
  `speculative.draft_tp` (default: the target's attention TP), and draft-layer ids numbered
  after the target's total layers (a stage-local count would collide with target layers);
- every tap with exactly one producer stage (start < L <= end, tap 0 on stage 0);
- tap routing `chain` (inside each stage handoff, as vLLM 0.33) and `direct` (straight to
  the last stage), both with bytes and extra messages per link per round;
- relays: each last-stage decision read on every stage reaches the earlier stages before
  they embed it. With relay `broadcast` a converged site's replica-wide collective already
  delivers it; everything else gets relay converge nodes over the pp family (`column`: a
  broadcast down each PP column; `ring`: stage to stage, last -> 0 -> 1 -> ...). Each relay
  is a guarded collective with its own header id (RELAY_ID_BASE + i) and packed layout, and
  every relay sends the pp family's one buffer (`buffer_bytes["pp"]`), as boundaries do.
"""

from __future__ import annotations

from specplan.engines.choices import RelayMode
from specplan.errors import PlanError
from specplan.ir import Node, node_id
from specplan.ir.codec import given
from specplan.ir.draft import PipelineDraft, RelayDraft, RelaysDraft, SiteDraft
from specplan.ir.records import Drafter, Link, Routing, SampledRows, TapProducers
from specplan.ir.nodes import RELAY_ID_BASE
from specplan.mesh.pipeline import draft_layer_ids
from specplan.passes.context import Planning
from specplan.passes.contracts import DRAFT
from specplan.passes.pin_widths import pack, share_buffers

NAME = "pipeline_stages"
REQUIRES = (DRAFT.dp_agreement, DRAFT.boundaries.each.layout, DRAFT.buffer_bytes)
ENSURES = (DRAFT.pipeline.stages, DRAFT.pipeline.relay.sampled_rows,
           DRAFT.pipeline.relay.sites.each.layout,
           DRAFT.pipeline.relay.sites.each.buffer_bytes)


def run(p: Planning) -> None:
    relay = RelaysDraft(mode=p.choices.relay, relay_drafts=p.choices.relay_drafts,
                        payload_width=p.choices.payload_width, sites=[],
                        sampled_rows=sampled_rows(p))
    p.draft.pipeline = PipelineDraft(
        stages=tuple(p.mesh.stages),
        drafter=_drafter(p),
        taps=_tap_producers(p),
        tap_ids=p.choices.tap_ids,
        aux_routing=p.choices.aux_routing,
        routing=Routing(chain=_routing(p, "chain"), direct=_routing(p, "direct")),
        relay=relay,
        handoff_bytes=_handoff_bytes(p),
    )
    relay.sites = _relays(p)
    share_buffers(p, relay.sites)


def sampled_rows(p: Planning) -> SampledRows | None:
    """The rule choosing the rows of the sampled-token broadcast (None without a pipeline).

    A round may mix prefill chunks and decode rows; a row samples when it decodes or its chunk
    completes the prompt. The length-cap test reads `computed`, which earlier rounds' drafts
    inflate until the entry is consumed, so it subtracts a discount: the bound num_steps (at
    least any inflation: the most drafts a round verifies, num_steps for a chain) or, replaying the seed's bug, this round's draft count.
    """
    if p.pp == 1:
        return None
    discount = p.spec.pipeline.sample_discount
    steps = p.spec.speculative.verify_width - 1  # the most drafts a round verifies
    minus = f"max drafts ({steps})" if discount == "bound" else "this round's draft count"
    return SampledRows(
        discount=discount, discount_tokens=steps if discount == "bound" else None,
        rule="a row is broadcast when its round samples (a decode row, or the chunk with "
             "computed + scheduled >= prompt_len) and max(computed - " + minus +
             ", prompt_len) + 1 < max_seq_len")


def attention_tp(p: Planning) -> int:
    d = p.mesh.derived
    return d["attn_tp"] if "attn_tp" in d else p.spec.topology.tp


def _drafter(p: Planning) -> Drafter | None:
    if not p.method.speculates:
        return None
    width = p.spec.speculative.draft_tp or attention_tp(p)
    if width not in (1, attention_tp(p)):
        raise PlanError.single(p.spec, ("speculative", "draft_tp"),
                               f"draft_tp={width} must be 1 or the attention TP width {attention_tp(p)}")
    n = 0 if p.method.drafter == "lookup" else p.spec.speculative.draft_num_layers or 1
    kind = p.method.drafter
    assert kind != "none", f"method {p.method.name} speculates without a drafter"
    return Drafter(stage=p.last_stage, pipeline_size=1, tp=width,
                        layer_ids=tuple(draft_layer_ids(p.mesh.stages, n, p.choices.draft_layer_ids)),
                        numbering=p.choices.draft_layer_ids,
                        kind=kind, target_layers=(0, p.spec.model.num_layers))


def _tap_producers(p: Planning) -> tuple[TapProducers, ...]:
    """Each tap the drafter reads, with every stage that produces a value under that id.

    Global ids: the one owner stage. Stage-local ids: every stage reads an id as an offset
    from its own first layer and takes tap 0, so ids collide and far ids go missing.
    """
    taps = p.spec.speculative.taps(p.spec.model.num_layers)
    out = []
    for tap in taps:
        if p.choices.tap_ids == "global":
            producers = [s.pp_rank for s in p.mesh.stages if tap in s.taps]
        else:
            producers = [s.pp_rank for s in p.mesh.stages if tap <= s.end_layer - s.start_layer]
        out.append(TapProducers(tap=tap, producers=tuple(producers)))
    return tuple(out)


def _tap_bytes(p: Planning) -> int:
    rows = p.spec.runtime.max_batch * p.spec.speculative.verify_width
    return rows * p.spec.model.hidden_size * p.act_bytes


def _handoff_bytes(p: Planning) -> int:
    """hidden_states + residual for one target-verify forward."""
    return 2 * _tap_bytes(p)


def _routing(p: Planning, mode: str) -> tuple[Link, ...]:
    stages, tap = p.mesh.stages, _tap_bytes(p)
    if len(stages) == 1:
        return ()
    if mode == "chain":
        out, carried = [], 0
        for s in stages[:-1]:
            carried += len(s.taps)
            out.append(Link(link=(s.pp_rank, s.pp_rank + 1), taps=carried, bytes=carried * tap,
                                 messages=0, note="rides inside the stage handoff"))
        return tuple(out)
    return tuple(Link(link=(s.pp_rank, p.last_stage), taps=len(s.taps),
                           bytes=len(s.taps) * tap, messages=1) for s in stages[:-1] if s.taps)


def _relays(p: Planning) -> list[RelayDraft]:
    if p.pp == 1:
        return []
    out: list[RelayDraft] = []
    for entry in given(p.draft.sites).values():
        if entry.readers != "all_stages" or entry.startup:
            continue
        if entry.converge and entry.family == "replica":
            continue  # the replica-wide collective already reaches every stage
        if entry.phase == "draft" and not p.choices.relay_drafts:
            continue  # the engine does not relay drafts: earlier stages embed placeholders
        mode = p.choices.relay if entry.converge else _unconverged_mode(p)
        layout = pack(p, [entry.name], guarded=True)
        out.append(RelayDraft(site=entry.name, round=entry.round, mode=mode, family="pp",
                              source_member=p.pp - 1, bytes=sum(f.bytes for f in layout.fields),
                              width=p.choices.payload_width, id=RELAY_ID_BASE + len(out),
                              layout=layout))
        _splice(p, entry, mode)
    return out


def _unconverged_mode(p: Planning) -> RelayMode:
    # Nothing agrees within the last stage, so each column carries its own rank's value.
    return "ring" if p.choices.relay == "ring" else "column"


def _splice(p: Planning, entry: SiteDraft, mode: RelayMode) -> None:
    g, rnd, last, name = p.graph, entry.round, p.last_stage, entry.name
    conv = node_id("converge", rnd, name, last)
    origin = [g.get(conv)] if g.has(conv) else \
        [n for n in g.nodes("decision", round=rnd, stage=last) if n.attr("site") == name]
    for s in range(p.pp):
        relay = g.add(Node("converge", f"relay_{name}", rnd, entry.phase, s,
                           attrs=(("decisions", entry.decisions), ("family", "pp"),
                                  ("mode", mode), ("order", origin[0].attr("order") + 1),
                                  ("source_member", p.pp - 1))))
        for src in origin:
            g.connect(src, relay, tuple(d for d in entry.decisions if src.kind == "converge"
                                        or d == src.name))
            if s == last:
                continue
            for reader in [r for r in g.successors(src) if r.stage == s and r.kind == "materialize"]:
                g.connect(relay, reader, g.disconnect(src, reader))
