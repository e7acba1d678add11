"""Rank programs the runtime tests launch (see tests/ranks.py): each an engine in miniature.

Every value a rank hands to a converge is generated from (rank, round, decision), so a rank can
recompute what the source must have sent and check the converged value against it. Faults are
planted by argument: `skip:R:ROUND:BOUNDARY` (rank R skips a boundary), `die:R:ROUND` (rank R is
SIGKILLed), `plant:R:ROUND` (rank R's first decision differs, for the probe and the trace).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
import zlib

import torch

from specplan.runtime import bind

from specplan.runtime.runtime import DTYPES
from tests.ranks import serve


def gen(seed_rank: int, rnd: int, decision: str, shape, dtype: str) -> torch.Tensor:
    g = torch.Generator().manual_seed(zlib.crc32(f"{seed_rank}/{rnd}/{decision}".encode()))
    if dtype == "float32":
        return torch.rand(shape, generator=g)
    if dtype == "bool":
        return torch.randint(0, 2, shape, generator=g).bool()
    return torch.randint(0, 7, shape, generator=g).to(DTYPES[dtype])


def faults(spec: str) -> dict:
    out = {}
    for item in filter(None, spec.split(",")):
        kind, *nums = item.split(":")
        out[kind] = [int(n) for n in nums]
    return out


def live_rows(rnd: int, max_batch: int) -> int:
    return 1 + (rnd * 3) % max_batch


def schedule(rounds: int):
    yield "startup", 0
    yield "prefill", 0
    for r in range(1, rounds + 1):
        yield "decode", r


def engine(plan_path: str, rounds: str, fault: str = "") -> dict:
    """Run the plan's programs for `rounds` decode rounds; check every converged value."""
    rt = bind(plan_path)
    checks = run_rounds(rt, int(rounds), fault)
    rt.close()
    return {"rank": rt.rank, "checks": checks}


def run_rounds(rt, rounds: int, fault: str = "", *, after_round=None, hot=None) -> int:
    """Every boundary and relay of the rank's programs, with every converged value checked.

    Values are checked at the end of each round, after `after_round()` (the device path's
    `check_round`, which must name a desync before a wrong value is noticed); `hot`, a context
    manager, is entered around each converge and relay call only.
    """
    view, f = rt.plan, faults(fault)
    stage, checks = view.stage_of(rt.rank), 0
    hot = hot or contextlib.nullcontext()
    for name, rnd in schedule(rounds):
        if f.get("die", [-1])[0] == rt.rank and f["die"][1] == rnd:
            os.kill(os.getpid(), signal.SIGKILL)
        if f.get("stall", [-1])[0] == rt.rank and f["stall"][1] == rnd:
            time.sleep(f["stall"][2])
        pairs = []
        for kind, what in view.program(stage, name):
            if kind == "boundary" and f.get("skip") == [rt.rank, rnd, what]:
                continue
            if kind == "boundary":
                pairs += converge_one(rt, view.boundaries[what], rnd, hot)
            elif kind == "relay":
                pairs += relay_one(rt, view.relay_of(what), rnd, hot)
        if after_round is not None:
            after_round()
        for what, got, want in pairs:
            assert torch.equal(got, want), (rt.rank, what, got, want)
        checks += len(pairs)
    return checks


def adopt(plan_path: str, families: str, variant: str = "", rounds: str = "2") -> dict:
    """An engine that made its own groups first hands `families` to bind, then runs rounds.

    variant `strided`: the engine built the first family's groups transposed (wrong ranks);
    `rank1-none`: rank 1 hands over nothing while the others adopt.
    """
    import torch.distributed as dist

    from specplan.runtime.binding import group_ranks
    from specplan.runtime.plan_view import PlanView

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=world)
    view, given = PlanView(plan_path), {}
    for i, name in enumerate(filter(None, families.split(","))):
        groups = view.families[name].groups() if name in view.families else [list(range(world))]
        if variant == "strided" and i == 0:
            groups = [list(g) for g in zip(*groups)]
        for members in groups:
            pg = dist.new_group(members)
            given[name] = pg if rank in members else given.get(name)
    if variant == "rank1-none" and rank == 1:
        given = {}
    created, real = [], dist.new_group
    dist.new_group = lambda ranks=None, **kw: created.append(list(ranks)) or real(ranks, **kw)
    try:
        rt = bind(plan_path, groups=given)
    finally:
        dist.new_group = real
    held = {f: group_ranks(g) for f, g in rt.groups.items()}
    kept = sorted(f for f, g in rt.groups.items() if any(g is mine for mine in given.values()))
    planned = dict(rt.ranks)
    checks = run_rounds(rt, int(rounds))
    rt.close()
    return {"rank": rank, "held": held, "plan": planned, "kept": kept, "created": created,
            "checks": checks}


def converge_one(rt, b, rnd: int, hot) -> list:
    """(what, converged, expected) per field of one boundary."""
    live = live_rows(rnd, rt.plan.max_batch)
    shapes = [rt.plan.live_shape(fl, live) for fl in b.fields]
    if b.op == "all_reduce_min":
        values = {fl.decision: torch.tensor(float(rt.rank + 1)) for fl in b.fields}
        with hot:
            out = rt.converge(b.id, values, round=rnd, live_rows=live)
        want = float(min(rt.ranks[b.family]) + 1)
        return [((b.id, d), v.reshape(()), torch.tensor(want, dtype=v.dtype)) for d, v in out.items()]
    values = {fl.decision: gen(rt.rank, rnd, fl.decision, s, fl.dtype) for fl, s in zip(b.fields, shapes)}
    with hot:
        out = rt.converge(b.id, values, round=rnd, live_rows=live)
    source = rt.ranks[b.family][b.source_member]
    return [((b.id, fl.decision), out[fl.decision], gen(source, rnd, fl.decision, s, fl.dtype))
            for fl, s in zip(b.fields, shapes)]


def relay_one(rt, r, rnd: int, hot) -> list:
    """The last stage relays what it converged; every stage must end with that rank's source's values."""
    view, live = rt.plan, live_rows(rnd, rt.plan.max_batch)
    last = rt.ranks["pp"][-1]
    b = view.boundary_of(r.sites[0])
    origin = view.group_of(b.family, last)[b.source_member]
    shapes = [view.live_shape(fl, live) for fl in r.fields]
    values = {fl.decision: gen(origin, rnd, fl.decision, s, fl.dtype) for fl, s in zip(r.fields, shapes)}
    with hot:
        out = rt.relay(r.sites[0], values if rt.rank == last else None, round=rnd, live_rows=live)
    return [((r.sites, fl.decision), out[fl.decision], values[fl.decision]) for fl in r.fields]


def local(plan_path: str, rounds: str, fault: str = "") -> dict:
    """Policy off: every site keeps its local values; the probe and the trace must see a plant."""
    rt = bind(plan_path)
    f, view = faults(fault), rt.plan
    probes = 0
    for rnd in range(1, int(rounds) + 1):
        live, held = 4, {}
        for site in [s for s in view.sites.values() if s["round"] == "decode"]:
            values = {d["name"]: gen(0, rnd, d["name"], view.live_shape(_field(d), live), d["dtype"])
                      for d in site["decisions"]}
            if f.get("plant") == [rt.rank, rnd] and not held:
                first = next(iter(values))
                values[first] = values[first] + 1
            held.update(rt.converge(site["name"], values, round=rnd, live_rows=live,
                                    requests=[f"req{i}" for i in range(live)]))
        probes += rt.maybe_probe(rnd, held)
    rt.close()
    return {"rank": rt.rank, "probes": probes}


def _field(d: dict):
    from specplan.runtime.plan_view import Field
    return Field("", d["name"], d["dtype"], tuple(d["shape"]), tuple(d["symbols"]), 0, d["bytes"])


def bindonly(*plans: str) -> dict:
    """Rank r binds plans[r] (or the last one): for bind and fingerprint tests."""
    rank = int(os.environ["RANK"])
    rt = bind(plans[min(rank, len(plans) - 1)])
    out = {"rank": rt.rank, "groups": dict(rt.ranks), "backend": rt.backend}
    rt.close()
    return out


def main(argv: list[str]) -> None:
    serve(globals(), argv)


def preflight(*plans: str) -> dict:
    """Rank r runs the preflight on plans[r] (or the last one) and exits with its code."""
    from specplan.runtime.preflight import main as preflight_main

    rank = int(os.environ["RANK"])
    code = preflight_main([plans[min(rank, len(plans) - 1)]])
    sys.stdout.flush()
    os._exit(code)
