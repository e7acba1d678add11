"""What the planner guarantees of every plan.json, checked again when one is read.

A fingerprint proves a plan unchanged only against its own content: a tool that writes plans,
or a person who recomputes the hash after an edit, gets past it. `load_plan` therefore checks
the invariants every reader relies on (and would crash or prove nonsense without), each from
the plan alone, at a cost in families, sites, fields and rank classes, never in ranks:

- every family rule is a bijection of range(world_size) (its shape multiplies to the world,
  its strides are a mixed-radix numbering of it) and states its own group size and count;
- widths agree with the world (and pp, tp with their families' group sizes);
- the stages split the target's layers in order; the method's widths are possible;
- runtime settings are in range (timeout_s > 0, finite, at most the schema's limit);
- every packed layout is the planner's packing: the guard header, each field's shape from its
  symbols at capacity, its bytes = dtype x shape, at the running 8-byte-aligned offset (so no
  two overlap), the layout's bytes its end, each family's one buffer its largest guarded layout;
- every op that names a boundary sends that boundary's bytes over its family from its source.
"""

from __future__ import annotations

import math

from specplan.ir.nodes import ROUNDS
from specplan.methods.base import DTYPE_BYTES, eval_dim
from specplan.passes.pin_widths import ALIGN, HEADER, HEADER_BYTES
from specplan.plan.artifact import Plan
from specplan.plan.codec import ABSENT
from specplan.plan.model import Boundary, FamilyRule, Field, Layout, Relay
from specplan.engines import convention
from specplan.schema.model import (MAX_BATCH, MAX_DRAFT_TOKENS, MAX_DRAFTS, MAX_RANKS, MAX_STEPS,
                                   MAX_TIMEOUT_S)

Problems = list[tuple[str, str]]


def invariants(plan: Plan) -> Problems:
    """Every broken invariant as (dotted path, message); [] for a plan compile could write."""
    out = _world(plan)
    if out:  # groups, stages and layouts are read through the families: stop here
        return out
    return ((_stages(plan) or _taps(plan)) + _speculative(plan) + _runtime(plan) + _sites(plan)
            + _layouts(plan) + _ops(plan))


def _world(plan: Plan) -> Problems:
    out: Problems = []
    world = plan.world_size
    if world * plan.num_worlds > MAX_RANKS:
        out.append(("world_size", f"{world} ranks x {plan.num_worlds} worlds is beyond the "
                                  f"limit of {MAX_RANKS:,} ranks"))
        return out
    for i, f in enumerate(plan.families):
        out += _rule(f"families[{i}]", f, world)
    pp = plan.family.get("pp")
    if not out and pp is not None and pp.group_size != plan.widths.get("pp"):
        out.append(("widths.pp", f"{plan.widths.get('pp')} stages, but the pp family's groups "
                                 f"hold {pp.group_size} ranks"))
    tp = plan.family.get("tp")
    if not out and tp is not None and "tp" in plan.widths and tp.group_size != plan.widths["tp"]:
        out.append(("widths.tp", f"{plan.widths['tp']}, but the tp family's groups hold "
                                 f"{tp.group_size} ranks"))
    return out


def _rule(path: str, f: FamilyRule, world: int) -> Problems:
    """A family's rule numbers every rank of the world exactly once (8 ranks, tp 2 x pp 4:
    shape (4, 2), strides (2, 1): sorted by stride, each stride is the product of the sizes
    below it, 1 then 2, and the sizes multiply to 8)."""
    rule = f.rule
    shape, strides = tuple(rule.shape), tuple(rule.strides)
    if len(shape) != len(strides) or not 1 <= rule.group_ndim <= len(shape):
        return [(f"{path}.rule", f"shape {list(shape)}, strides {list(strides)} and group_ndim "
                                 f"{rule.group_ndim} do not describe one view of the ranks")]
    if math.prod(shape) != world:
        return [(f"{path}.rule.shape", f"{list(shape)} numbers {math.prod(shape)} ranks, but "
                                       f"world_size is {world}")]
    expected = 1
    for stride, size in sorted((t, s) for s, t in zip(shape, strides) if s > 1):
        if stride != expected:
            return [(f"{path}.rule.strides", f"{list(strides)} with shape {list(shape)} reaches "
                                             f"ranks outside 0 .. {world - 1} or some twice")]
        expected *= size
    split = len(shape) - rule.group_ndim
    size, count = math.prod(shape[split:]), math.prod(shape[:split])
    if (f.group_size, f.num_groups) != (size, count):
        return [(f"{path}.group_size", f"group_size {f.group_size} x num_groups {f.num_groups}, "
                                       f"but the rule makes {count} groups of {size} ranks")]
    return []


def _stages(plan: Plan) -> Problems:
    stages, layers = plan.pipeline.stages, plan.model.num_layers
    if len(stages) != plan.pp:
        return [("pipeline.stages", f"{len(stages)} stages, but widths.pp is {plan.pp}")]
    start = 0
    for i, s in enumerate(stages):
        if s.pp_rank != i or s.start_layer != start or s.end_layer <= s.start_layer:
            return [(f"pipeline.stages[{i}]", f"stage {s.pp_rank} holds layers [{s.start_layer}, "
                                              f"{s.end_layer}); expected stage {i} from layer {start}")]
        start = s.end_layer
    if start != layers:
        return [("pipeline.stages", f"the stages end at layer {start}, the model has {layers}")]
    if plan.in_flight != plan.pp:  # passes/schedule.py: one decode round in flight per stage
        return [("in_flight", f"{plan.in_flight} decode rounds in flight, but widths.pp is "
                              f"{plan.pp}: one per stage")]
    return []


def _taps(plan: Plan) -> Problems:
    """Every tap inside the model, each listed once with producers that are stages."""
    layers, taps = plan.model.num_layers, tuple(plan.speculative.taps)
    if any(not 0 <= t <= layers for t in taps) or list(taps) != sorted(set(taps)):
        return [("speculative.taps", f"{list(taps)}: expected ascending tap ids in 0 .. {layers}")]
    listed = tuple(e.tap for e in plan.pipeline.taps)
    if listed and listed != taps:
        return [("pipeline.taps", f"taps {list(listed)}, but speculative.taps is {list(taps)}")]
    for i, e in enumerate(plan.pipeline.taps):
        if any(not 0 <= r < plan.pp for r in e.producers):
            return [(f"pipeline.taps[{i}].producers", f"{list(e.producers)}: expected stages 0 .. {plan.pp - 1}")]
    for i, s in enumerate(plan.pipeline.stages):
        made = [e.tap for e in plan.pipeline.taps if i in e.producers]
        # stage-local tap ids (a modelled engine bug) let producers differ: check finds that
        if plan.pipeline.taps and plan.pipeline.tap_ids == "global" and list(s.taps) != made:
            return [(f"pipeline.stages[{i}].taps", f"{list(s.taps)}, but pipeline.taps names stage "
                                                   f"{i} the producer of {made}")]
    drafter = plan.pipeline.drafter
    if drafter is not None and (drafter.stage != plan.pp - 1 or tuple(drafter.target_layers) != (0, layers)):
        return [("pipeline.drafter", f"on stage {drafter.stage} over target layers "
                                     f"{list(drafter.target_layers)}; expected the last stage, "
                                     f"{plan.pp - 1}, over [0, {layers}]")]
    return []


def _sites(plan: Plan) -> Problems:
    """Each site converges at the boundary that lists it, from that boundary's source; the
    unfused pairs name sites."""
    at = {name: b for b in plan.boundaries for name in b.sites}
    for i, s in enumerate(plan.sites):
        b = at.get(s.name)
        if (s.boundary if b is None else b.id) != s.boundary or (b is not None and s.source_member != b.source_member):
            where = "no boundary" if b is None else f"boundary {b.id} (source member {b.source_member})"
            return [(f"sites[{i}]", f"{s.name}: boundary {s.boundary}, source member "
                                    f"{s.source_member}, but {where} lists it")]
    for i, u in enumerate(plan.unfused):
        if u.after not in plan.site or u.before not in plan.site:
            return [(f"unfused[{i}]", f"{u.after!r} -> {u.before!r}: expected two sites of the plan")]
    ids = sorted(c.id for c in plan.rank_classes)
    if ids != list(range(len(ids))):
        return [("rank_classes", f"class ids {ids}: expected 0 .. {len(ids) - 1}")]
    return []


def _speculative(plan: Plan) -> Problems:
    sp = plan.speculative
    if not convention(plan.engine).method(sp.method).speculates:
        ok = sp.num_steps == 0 and sp.num_draft_tokens == 1
        return [] if ok else [("speculative", "method none drafts nothing: expected num_steps 0 "
                                              f"and num_draft_tokens 1, found {sp.num_steps} and "
                                              f"{sp.num_draft_tokens}")]
    trie = convention(plan.engine).method(sp.method).trie  # no num_steps levels: any width from 2
    if not int(not trie) <= sp.num_steps <= MAX_DRAFTS or not 1 <= sp.topk <= MAX_STEPS:
        return [("speculative.num_steps", f"num_steps {sp.num_steps}, topk {sp.topk}: expected "
                                          f"{int(not trie)} .. {MAX_DRAFTS} and 1 .. {MAX_STEPS} "
                                          f"for method {sp.method}")]
    top, bound = ((MAX_DRAFT_TOKENS, "a trie's nodes") if trie else
                  convention(plan.engine).max_draft_tokens(sp.topk, sp.num_steps))
    if not 2 <= sp.num_draft_tokens <= top:
        return [("speculative.num_draft_tokens", f"{sp.num_draft_tokens}: expected 2 .. {top} ({bound})")]
    if sp.max_batch != plan.runtime.max_batch:
        return [("speculative.max_batch", f"{sp.max_batch}, but runtime.max_batch is "
                                          f"{plan.runtime.max_batch}")]
    return []


def _runtime(plan: Plan) -> Problems:
    rt = plan.runtime
    out: Problems = []
    if not 0 < rt.timeout_s <= MAX_TIMEOUT_S:  # nan fails both comparisons
        out.append(("runtime.timeout_s", f"{rt.timeout_s}: expected seconds in (0, {MAX_TIMEOUT_S:g}]"))
    if rt.max_batch > MAX_BATCH:
        out.append(("runtime.max_batch", f"{rt.max_batch}: expected at most {MAX_BATCH:,}"))
    return out


def _layouts(plan: Plan) -> Problems:
    out: Problems = []
    largest: dict[str, int] = {}
    collectives: list[tuple[str, Boundary | Relay]] = [
        (f"boundaries[{i}]", b) for i, b in enumerate(plan.boundaries)]
    collectives += [(f"pipeline.relay.sites[{i}]", r) for i, r in enumerate(plan.relays)]
    for path, c in collectives:
        out += _layout(plan, f"{path}.layout", c.layout)
        if c.layout.header_bytes:
            largest[c.family] = max(largest.get(c.family, 0), c.layout.bytes)
    if out:
        return out
    if dict(plan.buffer_bytes) != largest:
        return [("buffer_bytes", f"{dict(plan.buffer_bytes)}, but each family's largest guarded "
                                 f"layout is {largest}")]
    for path, c in collectives:
        want = plan.buffer_bytes[c.family] if c.layout.header_bytes else c.layout.bytes
        if c.buffer_bytes != want:
            out.append((f"{path}.buffer_bytes", f"{c.buffer_bytes}, expected {want}"))
    return out + _decisions(plan)


def _layout(plan: Plan, path: str, layout: Layout) -> Problems:
    guarded = bool(layout.header_bytes)
    header = tuple(tuple(h) for h in layout.header)
    if (header, layout.header_bytes) not in ((HEADER, HEADER_BYTES), ((), 0)):
        return [(f"{path}.header", f"{[list(h) for h in header]} of {layout.header_bytes} bytes "
                                   "is not the guard header (or none)")]
    if layout.capacity_rows != plan.runtime.max_batch:
        return [(f"{path}.capacity_rows", f"{layout.capacity_rows}, but runtime.max_batch is "
                                          f"{plan.runtime.max_batch}")]
    offset = HEADER_BYTES if guarded else 0
    for j, f in enumerate(layout.fields):
        problem = _field(plan, f, offset)
        if problem:
            return [(f"{path}.fields[{j}]", problem)]
        offset += -(-f.bytes // ALIGN) * ALIGN
    if layout.bytes != offset:
        return [(f"{path}.bytes", f"{layout.bytes}, but its fields end at byte {offset}")]
    return []


def _field(plan: Plan, f: Field, offset: int) -> str | None:
    site = plan.site.get(f.site)
    decision = next((d for d in site.decisions if d.name == f.decision), None) if site else None
    if decision is None:
        return f"{f.site}.{f.decision} is no decision of a site of the plan"
    shape = _shape(plan, f.symbols)
    if shape is None or list(f.shape) != shape or f.dtype != decision.dtype:
        return (f"{f.dtype} {list(f.shape)} of symbols {list(f.symbols)}: expected "
                f"{decision.dtype} {shape} at capacity")
    if f.bytes != math.prod(shape) * DTYPE_BYTES[f.dtype]:
        return f"{f.bytes} bytes, but {f.dtype} x {shape} is {math.prod(shape) * DTYPE_BYTES[f.dtype]}"
    if f.offset != offset:
        return f"offset {f.offset}, expected {offset} (fields are packed in order, 8-byte aligned)"
    return None


def _decisions(plan: Plan) -> Problems:
    for i, s in enumerate(plan.sites):
        for j, d in enumerate(s.decisions):
            shape = _shape(plan, d.symbols)
            if shape is None or list(d.shape) != shape or d.bytes != math.prod(shape) * DTYPE_BYTES[d.dtype]:
                return [(f"sites[{i}].decisions[{j}]", f"{d.dtype} {list(d.shape)} of {d.bytes} "
                                                       f"bytes does not match symbols {list(d.symbols)}")]
    return []


def _shape(plan: Plan, symbols: tuple[str, ...]) -> list[int] | None:
    try:
        dims = [eval_dim(s, plan.symbols) for s in symbols]
    except Exception:  # a symbol the plan does not define, or an expression it cannot read
        return None
    return dims if all(d >= 0 for d in dims) else None


def _ops(plan: Plan) -> Problems:
    for i, c in enumerate(plan.rank_classes):
        for kind in ROUNDS:
            for j, op in enumerate(c.program.round(kind)):
                if not isinstance(op.boundary, int) or isinstance(op.boundary, bool):
                    continue
                if op.bytes is None and plan.pipeline.relay.payload_width == "dynamic":
                    continue  # the sender's width, known at run time only (payload_width: dynamic)
                b = plan.boundaries[op.boundary]
                source = b.source_member if op.source_member is ABSENT else op.source_member
                sites = b.sites if op.sites is ABSENT else tuple(op.sites)
                if (op.family, op.bytes, source, sites) != (b.family, b.buffer_bytes, b.source_member, tuple(b.sites)):
                    return [(f"rank_classes[{i}].program.{kind}[{j}]",
                             f"sends {op.bytes} bytes of {list(sites)} over {op.family} from "
                             f"member {source}; boundary {b.id} sends {b.buffer_bytes} of "
                             f"{list(b.sites)} over {b.family} from member {b.source_member}")]
    return []
