"""The plan's gates, run by the sim's ranks (DESIGN.md §7 item 6; plan.json `gates`).

Each gate, in its phase (start-up once, the prefill, the first decode round), on every rank:
1. the input: the value the rank reads (`--inject gate` or `gate:<name>`: a per-rank
   divergence, the rank's own number plus one, as a free-memory reading, a batch's composition
   or a timing differs from rank to rank; else one value everywhere);
2. the agreement the plan states: a MIN over the gate's family (none when the gate has no
   family, or its carrier site does not converge, as check reads it: verify/gates.py);
3. every collective the gate selects, over that collective's family, with the shape the agreed
   value chooses. Each carries a guard header (gate, collective, round, the value's shape)
   all-gathered first, as the runtime's fused buffers do, so ranks that chose differently meet
   a header mismatch naming the gate (GateMismatch) instead of a collective of another size,
   which hangs NCCL and crashes gloo; a peer that never issues the collective is a
   CollectiveTimeout naming it.

check ERROR on a gate (a selected group not inside its agreement group) is exactly the case
where ranks of one selected group hold different agreed values under a per-rank divergence, so
simulate fails by the gate's name; a clean gate passes.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from specplan.runtime.errors import GateMismatch

OPS = ("all_reduce", "all_gather", "broadcast", "reduce_scatter", "all_to_all", "capture")

__all__ = ["GateMismatch", "OPS", "agreement", "injected", "run"]


def injected(inject: str, name: str) -> bool:
    return inject == "gate" or inject == f"gate:{name}"


def agreement(plan, gate) -> str | None:
    """The family the gate is agreed over in this plan (verify/gates.py `agreement`)."""
    if gate.site is not None and not plan.site[gate.site].converge:
        return None
    return gate.family


def run(e, phase: str) -> None:
    """Every gate of `phase` on this rank: read, agree, then issue what it selects."""
    plan = e.view.plan
    for index, gate in enumerate(plan.gates):
        if gate.phase != phase:
            continue
        value = e.rt.rank + 1 if injected(e.sim.inject, gate.name) else 0
        family = agreement(plan, gate)
        if family is not None:
            value = _min(e, value, family)
        for k, sel in enumerate(gate.selects):
            _issue(e, index, k, gate, sel, value)


def _min(e, value: int, family: str) -> int:
    x = torch.tensor([value], dtype=torch.int64)
    group, ranks = e.comm._group(family)
    if len(ranks) > 1:
        e.comm._wait(dist.all_reduce(x, op=dist.ReduceOp.MIN, group=group, async_op=True),
                     f"gate agreement (MIN)", family)
    return int(x[0])


def _issue(e, index: int, k: int, gate, sel, value: int) -> None:
    """The selected collective's guard header, all-gathered over its group, then the
    collective itself with the rows the value chose (all_gather of `value + 1` rows)."""
    group, ranks = e.comm._group(sel.family)
    if len(ranks) == 1:
        return
    header = torch.tensor([index, k, OPS.index(sel.op) if sel.op in OPS else -1, e.round, value],
                          dtype=torch.int64)
    seen = [torch.empty_like(header) for _ in ranks]
    e.comm._wait(dist.all_gather(seen, header, group=group, async_op=True),
                 f"gate {gate.name}: {sel.op} header", sel.family)
    values = [int(h[4]) for h in seen]
    if len(set(values)) > 1:
        split: dict[int, list[int]] = {}
        for r, v in zip(ranks, values):
            split.setdefault(v, []).append(r)
        sides = "; ".join(f"ranks {rs} chose {v}" for v, rs in split.items())
        agreed = f"agreed over {gate.family}" if agreement(e.view.plan, gate) else "agreed by no group"
        raise GateMismatch(
            f"gate {gate.name} ({gate.phase}, round {e.round}, {agreed}) selects {sel.op} over "
            f"{sel.family} {ranks}, but its ranks chose differently ({sides}; this is rank "
            f"{e.rt.rank}): the engine's ranks would issue {sel.op}s of different shapes, or "
            f"wait on one a peer never issues ({gate.function})")
    rows = torch.zeros(value + 1, dtype=torch.int64)
    out = [torch.empty_like(rows) for _ in ranks]
    e.comm._wait(dist.all_gather(out, rows, group=group, async_op=True),
                 f"gate {gate.name}: {sel.op}", sel.family)
