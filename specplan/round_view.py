"""The round view `specplan explain` adds: sites with group and bytes, collectives and bytes
per rank per round, taps and relays per stage. Built from the Plan alone."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from specplan.plan import ABSENT, Plan
from specplan.plan.codec import encode

COLLECTIVES = ("broadcast", "all_reduce_min", "all_gather", "all_reduce_sum", "all_to_all", "ring")


def round_data(plan: Plan) -> dict[str, Any]:
    per_class = []
    for cls in plan.rank_classes:
        rounds = {}
        for rnd, ops in cls.program.items():
            coll = [o for o in ops if o.op in COLLECTIVES or o.op in ("send", "recv")]
            fused = [o for o in coll if not o.per_layer]
            # payload_width: dynamic leaves the sender's bytes unknown until run time (None)
            rounds[rnd] = {"collectives": len(fused),
                           "per_layer_collectives": len(coll) - len(fused),
                           "bytes": sum(o.bytes or 0 for o in fused if o.bytes is not ABSENT),
                           "dynamic_collectives": sum(1 for o in fused if o.bytes is None)}
        per_class.append({"class": cls.id, "rule": dict(cls.rule), "rounds": rounds})
    pipe = plan.pipeline
    return {
        "fingerprint": plan.fingerprint,
        "sites": [{"site": s.name, "round": s.round, "family": s.family,
                   "source_member": s.source_member, "converge": s.converge,
                   "trivial": s.trivial, "boundary": s.boundary,
                   "bytes": sum(d.bytes for d in s.decisions), "reason": s.reason}
                  for s in plan.sites],
        "boundaries": [{"id": b.id, "round": b.round, "family": b.family, "op": b.op,
                        "sites": list(b.sites), "bytes": b.buffer_bytes} for b in plan.boundaries],
        "per_rank_class": per_class,
        "pipeline": {"drafter": encode(pipe.drafter), "aux_routing": pipe.aux_routing,
                     "routing": encode(pipe.routing), "relay": encode(pipe.relay)},
        "dp_agreement": encode(plan.dp_agreement),
    }


def render_round(data: dict, console: Console) -> None:
    table = Table(title="sites (decode round unless noted)", title_justify="left")
    for col in ("site", "round", "group", "source", "bytes", "converge", "boundary", "why"):
        table.add_column(col)
    for s in data["sites"]:
        conv = "no-op (1 rank)" if s["trivial"] and s["converge"] else ("yes" if s["converge"] else "no")
        table.add_row(s["site"], s["round"], s["family"], f"member {s['source_member']}", str(s["bytes"]),
                      conv, "-" if s["boundary"] is None else str(s["boundary"]), s["reason"])
    console.print(table)
    table = Table(title="collectives per rank per round (fused boundaries; per-layer model collectives apart)",
                  title_justify="left")
    for col in ("ranks", "round", "collectives", "bytes", "per-layer"):
        table.add_column(col)
    for cls in data["per_rank_class"]:
        for rnd, r in cls["rounds"].items():
            if r["collectives"] or r["per_layer_collectives"]:
                dynamic = f" + {r['dynamic_collectives']} at run-time width" if r["dynamic_collectives"] else ""
                table.add_row(f"stage {cls['rule']['pp']}", rnd, str(r["collectives"]),
                              human_bytes(r["bytes"]) + dynamic, str(r["per_layer_collectives"]))
    console.print(table)
    _pipeline(data["pipeline"], console)


def _pipeline(pipe: dict, console: Console) -> None:
    d = pipe["drafter"]
    if d:
        console.print(f"drafter: stage {d['stage']}, pipeline size 1, tp {d['tp']}, "
                      f"draft-layer ids {d['layer_ids'] or '-'}")
    for mode in ("chain", "direct"):
        links = pipe["routing"][mode]
        if links:
            mark = " (planned)" if mode == pipe["aux_routing"] else ""
            text = ", ".join(f"{a}->{b}: {l['taps']} taps {human_bytes(l['bytes'])} +{l['messages']} msg"
                             for l in links for a, b in [l["link"]])
            console.print(f"taps {mode}{mark}: {text}")
    for r in pipe["relay"]["sites"]:
        console.print(f"relay {r['site']}: {r['mode']} over pp from the last stage, {human_bytes(r['bytes'])}")


def human_bytes(n: int) -> str:
    """1536 -> '1.5 KiB'."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)
