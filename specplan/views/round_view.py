"""The round view `specplan explain` adds: sites with group and bytes, collectives and bytes
per rank per round, taps and relays per stage. Built from the Plan alone.

Byte figures are what one rank sends per round with buffers sized for `runtime.max_batch`
rows (the plan's static buffers: what crosses the wire whatever the batch), beside the bytes
of the live rows at a typical batch, `typical_batch`: a quarter of max_batch (at least 1),
as decode batches run below the capacity they were sized for. The per-layer column counts the
collectives each MoE layer of the target issues per forward to move rows between the
attention layout and the experts' (the engine convention says which), apart from the fused
count; the tensor-parallel all-reduces of attention and dense layers are not counted.

`explain --json` carries it under `round`: max_batch and typical_batch; per rank class and
round, collectives, bytes (at max_batch), live_bytes (at typical_batch), dynamic_collectives,
per_layer_collectives and per_layer ([{op, family, what}]); each site's source_member and
source_ranks (that member's global rank in each group of the site's family)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from specplan.mesh.family import Family
from specplan.plan import ABSENT, Plan
from specplan.plan.codec import encode
from specplan.plan.model import Pipeline

COLLECTIVES = ("broadcast", "all_reduce_min", "all_gather", "all_reduce_sum", "all_to_all", "ring")
TARGET = ("target_verify", "target_prefill")


def typical_batch(max_batch: int) -> int:
    """The batch the live-rows figure is given at: a quarter of max_batch, at least 1."""
    return max(1, max_batch // 4)


def round_data(plan: Plan, lazy: bool = False) -> dict[str, Any]:
    """The round as data; with `lazy`, each site's source ranks are a listing made from the
    family rule when read (explain streams it), else a list."""
    typical = typical_batch(plan.max_batch)
    layer = _layer_collectives(plan)
    per_class = []
    for cls in plan.rank_classes:
        rounds = {}
        for rnd, ops in cls.program.items():
            coll = [o for o in ops if o.op in COLLECTIVES or o.op in ("send", "recv")]
            fused = [o for o in coll if not o.per_layer]
            moe = any(o.op == "forward" and o.compute in TARGET for o in ops) and plan.moe is not None
            # payload_width: dynamic leaves the sender's bytes unknown until run time (None)
            rounds[rnd] = {"collectives": len(fused),
                           "per_layer_collectives": len(layer) if moe else 0,
                           "per_layer": list(layer) if moe else [],
                           "bytes": sum(o.bytes or 0 for o in fused if o.bytes is not ABSENT),
                           "live_bytes": sum(_live_bytes(plan, o, typical) for o in fused),
                           "dynamic_collectives": sum(1 for o in fused if o.bytes is None)}
        per_class.append({"class": cls.id, "rule": dict(cls.rule), "rounds": rounds})
    families = {f.name for f in plan.families}
    pipe = plan.pipeline
    return {
        "fingerprint": plan.fingerprint,
        "max_batch": plan.max_batch,
        "typical_batch": typical,
        "sites": [{"site": s.name, "round": s.round, "family": s.family,
                   "source_member": s.source_member,
                   "source_ranks": _source_ranks(plan.family[s.family], s.source_member, lazy)
                   if s.family in families else [],
                   "converge": s.converge,
                   "trivial": s.trivial, "boundary": s.boundary,
                   "bytes": sum(d.bytes for d in s.decisions), "reason": s.reason}
                  for s in plan.sites],
        "gates": [{"gate": g.name, "phase": g.phase, "input": g.input, "family": g.family,
                   "site": g.site, "agreed_by": g.agreed_by, "function": g.function,
                   "selects": [{"op": c.op, "family": c.family} for c in g.selects]}
                  for g in plan.gates],
        "boundaries": [{"id": b.id, "round": b.round, "family": b.family, "op": b.op,
                        "sites": list(b.sites), "bytes": b.buffer_bytes} for b in plan.boundaries],
        "per_rank_class": per_class,
        "pipeline": {"drafter": encode(pipe.drafter), "aux_routing": pipe.aux_routing,
                     "routing": encode(pipe.routing), "relay": encode(pipe.relay)},
        "dp_agreement": encode(plan.dp_agreement),
    }


def _source_ranks(fam: Family, member: int, lazy: bool):
    """The rank at `member` of every group, in creation order, from the rule (not the groups)."""
    if lazy:
        from specplan.views.explain_stream import Members

        return Members(fam, member)
    offset = fam.rank_at(0, member)
    return [b + offset for b in fam.bases()]


def _layer_collectives(plan: Plan) -> list[dict[str, str]]:
    if plan.moe is None:
        return []
    from specplan.engines import convention

    found = convention(plan.engine).moe_layer_collectives(plan.derived, plan.widths, plan.moe)
    return [{"op": c.op, "family": c.family, "what": c.what} for c in found]


def _live_bytes(plan: Plan, op, typical: int) -> int:
    """What `op` carries for `typical` live rows: a guarded buffer's header and the live rows
    of its batch-sized fields; a handoff scaled from max_batch rows; anything else as is."""
    if op.bytes is ABSENT or op.bytes is None:
        return 0
    layout = None
    if op.boundary is not ABSENT:
        layout = next(b.layout for b in plan.boundaries if b.id == op.boundary)
    elif op.site is not ABSENT and op.site in plan.relay:
        layout = plan.relay[op.site].layout
    if layout is not None:
        return layout.header_bytes + sum(f.bytes * typical // layout.capacity_rows if "bs" in f.symbols
                                         else f.bytes for f in layout.fields)
    if op.op in ("send", "recv"):
        return op.bytes * typical // plan.max_batch
    return op.bytes


def render_round(data: dict, console: Console, pipeline: Pipeline) -> None:
    """The round view's tables from round_data's `data`; the pipeline lines from the typed
    plan's `pipeline` (plan.json is read only through the typed plan)."""
    at = f"max_batch={data['max_batch']}"
    table = Table(title=f"sites (decode round unless noted; bytes per rank at {at})", title_justify="left")
    for col in ("site", "round", "group", "source", "bytes", "converge", "boundary", "why"):
        table.add_column(col)
    for s in data["sites"]:
        conv = "no-op (1 rank)" if s["trivial"] and s["converge"] else ("yes" if s["converge"] else "no")
        table.add_row(s["site"], s["round"], s["family"], source_text(s["source_member"], s["source_ranks"]),
                      str(s["bytes"]), conv, "-" if s["boundary"] is None else str(s["boundary"]), s["reason"])
    console.print(table)
    _render_gates(data["gates"], console)
    typical = data["typical_batch"]
    table = Table(title=f"collectives and bytes per rank per round at {at}", title_justify="left")
    for col in ("ranks", "round", "collectives", f"bytes ({at})", f"live rows (batch {typical})",
                "per-layer"):
        table.add_column(col)
    legend: dict[tuple[str, str, str], None] = {}
    for cls in data["per_rank_class"]:
        for rnd, r in cls["rounds"].items():
            if r["collectives"] or r["per_layer_collectives"]:
                dynamic = f" + {r['dynamic_collectives']} at run-time width" if r["dynamic_collectives"] else ""
                table.add_row(f"stage {cls['rule']['pp']}", rnd, str(r["collectives"]),
                              human_bytes(r["bytes"]) + dynamic, human_bytes(r["live_bytes"]),
                              str(r["per_layer_collectives"]))
                legend.update({(c["what"], c["op"], c["family"]): None for c in r["per_layer"]})
    console.print(table)
    for line in _legend(data["max_batch"], typical, list(legend)):
        console.print(Text(line))
    _pipeline(pipeline, console)


def _legend(max_batch: int, typical: int, per_layer: list[tuple[str, str, str]]) -> list[str]:
    moved = ", ".join(f"{what} ({op} over {family})" for what, op, family in per_layer) or "none"
    return ["collectives: fused converge boundaries, relays, stage handoffs, DP token counts",
            f"bytes: what those send, buffers sized for max_batch={max_batch} rows",
            f"live rows: the bytes of the live rows at a typical batch of {typical} (max_batch/4)",
            f"per-layer: collectives each MoE layer of the target issues per forward: {moved}",
            "  (rows to and from the experts; the all-reduces of attention and dense layers are not counted)"]


def source_text(member: int, ranks: list[int]) -> str:
    """`member 4 = rank 12` for a family of one group; `member 0 = ranks 0, 2, ..., 14` (one per
    group) otherwise."""
    if len(ranks) == 1:
        return f"member {member} = rank {ranks[0]}"
    if not ranks:
        return f"member {member}"
    shown = ", ".join(map(str, ranks)) if len(ranks) <= 3 else f"{ranks[0]}, {ranks[1]}, ..., {ranks[-1]}"
    return f"member {member} = ranks {shown}"


def _pipeline(pipe: Pipeline, console: Console) -> None:
    d = pipe.drafter
    if d is not None:
        console.print(f"drafter: stage {d.stage}, pipeline size 1, tp {d.tp}, "
                      f"draft-layer ids {list(d.layer_ids) or '-'}")
    for mode, links in (("chain", pipe.routing.chain), ("direct", pipe.routing.direct)):
        if links:
            mark = " (planned)" if mode == pipe.aux_routing else ""
            text = ", ".join(f"{a}->{b}: {l.taps} taps {human_bytes(l.bytes)} +{l.messages} msg"
                             for l in links for a, b in [l.link])
            console.print(f"taps {mode}{mark}: {text}")
    for r in pipe.relay.sites:
        console.print(f"relay {r.site}: {r.mode} over pp from the last stage, {human_bytes(r.bytes)}")


def human_bytes(n: int) -> str:
    """1536 -> '1.5 KiB'."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return str(size)


def _render_gates(gates: list[dict], console: Console) -> None:
    """Gates beside the sites: the group each is agreed over and the groups it selects."""
    if not gates:
        return
    table = Table(title="gates (decisions that select collectives; check proves each agreed "
                        "over every group it selects)", title_justify="left")
    for col in ("gate", "phase", "input", "agreed over", "selects", "engine function"):
        table.add_column(col)
    for g in gates:
        agreed = g["family"] or "none (each rank alone)"
        if g["site"]:
            agreed += f" (site {g['site']})"
        selects = ", ".join(f"{c['op']} over {c['family']}" for c in g["selects"])
        table.add_row(g["gate"], g["phase"], g["input"].replace("_", "-"), agreed, selects,
                      g["function"])
    console.print(table)
