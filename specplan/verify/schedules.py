"""Guarantees 2 and 3: fixed, equal byte counts; one order per group; no deadlock; DP lockstep.

Every rank of a class runs the same program, so the schedule is simulated per class: a
collective on family F completes when every class whose ranks share F's groups stands at
an op on F with the same signature (op, bytes, boundary or site). Send and recv meet their
peer stage. Rounds run in order (startup, prefill, then `in_flight` decode rounds). A
mismatch is an order or size error; a state where nothing can move is a deadlock. Under
DP-attention an idle DP rank that skips work is its own class on the same stage.
Which classes meet in a family's groups is read from the family rule (mesh/digits.py).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, replace

from specplan.mesh.digits import Digits
from specplan.plan import ABSENT, PlanView, given, opt
from specplan.plan.model import Boundary, Op, Program, Relay
from specplan.verify.findings import Finding

P2P = ("send", "recv")
Cls = tuple[int, bool]  # a rank class as the simulation knows it: (stage, busy)
Programs = dict[Cls, list[tuple[str, Op]]]  # each class's (round, op) sequence


@dataclass
class _Partners:
    """The family rule as digits (None: no partition) and the partners found so far."""

    digits: Digits | None
    found: dict[tuple[Cls, str], list[Cls]] = field(default_factory=dict)


def check_schedules(view: PlanView) -> list[Finding]:
    out = _unfixed_bytes(view) + _buffers(view) + _dataflow(view)
    programs = _programs(view)
    out.extend(_simulate(view, programs))
    return out


def _unfixed_bytes(view: PlanView) -> list[Finding]:
    out = []
    for cls in view.plan.rank_classes:
        for rnd, ops in cls.program.items():
            for op in ops:
                if op.bytes is None:  # null, not absent: a width known only at run time
                    out.append(Finding(
                        severity="ERROR", site=op_site(op), group=op.family, round=rnd,
                        line=view.line("pipeline.payload_width"),
                        message=f"stage {cls.stage} sends {op_site(op) or op.op} at its actual width "
                        f"while the receivers post a fixed width: the counts differ, the sender completes "
                        f"and the receivers wait until the watchdog fires",
                        fix="pin the payload width (pipeline.payload_width: pinned)"))
    return out


def _buffers(view: PlanView) -> list[Finding]:
    """Every guarded collective of one family uses one buffer size, and each op sends it."""
    bounds = {b.id: b for b in view.plan.boundaries}
    relays = view.plan.relay
    sizes = view.plan.buffer_bytes
    out = []
    guarded = [b for b in bounds.values() if b.op == "broadcast"] + list(relays.values())
    for b in guarded:
        if b.buffer_bytes != sizes.get(b.family, b.buffer_bytes):
            out.append(_buffer(view, b.round, b.family,
                               f"{_what(b)} uses a {b.buffer_bytes}-byte buffer (per rank per round at "
                               f"max_batch={view.plan.max_batch}) while {b.family}'s other broadcasts use "
                               f"{sizes[b.family]}: ranks "
                               f"that fall out of order meet a size mismatch (a hang) instead of a header mismatch"))
    for cls in view.plan.rank_classes:
        for rnd, ops in cls.program.items():
            for op in ops:
                held: Boundary | Relay | None = (
                    bounds.get(op.boundary) if op.boundary is not ABSENT
                    else relays.get(op.site) if op.site is not ABSENT else None)
                if held is not None and op.bytes is not None and op.bytes != held.buffer_bytes:
                    out.append(_buffer(view, rnd, op.family,
                                       f"stage {cls.stage} sends {_what(held)} with {op.bytes} "
                                       f"bytes, but its packed buffer is {held.buffer_bytes} bytes "
                                       f"(per round at max_batch={view.plan.max_batch})"))
    return out


def _what(collective: Boundary | Relay) -> str:
    if isinstance(collective, Relay):
        return f"relay {collective.site}"
    return f"boundary {collective.id} ({', '.join(collective.sites)})"


def _buffer(view: PlanView, rnd: str, family: str, message: str) -> Finding:
    return Finding(severity="ERROR", group=family, round=rnd,
                   line=view.line("sync.policy"), message=message,
                   fix="regenerate the plan: buffer sizes are fixed by the planner (pin_widths)")


def _dataflow(view: PlanView) -> list[Finding]:
    """A stage forwards a handoff only after receiving it and running its own layers on it."""
    out = []
    for cls in view.plan.rank_classes:
        for rnd, ops in cls.program.items():
            for i, op in enumerate(ops):
                if op.op != "send" or not (op.what or "").endswith("_handoff"):
                    continue
                what, compute = op.what, op.what[: -len("_handoff")]
                later = [o for o in ops[i + 1:] if o.op == "recv" and o.what == what
                         or o.op == "forward" and o.compute == compute]
                if later:
                    out.append(Finding(
                        severity="ERROR", group=op.family, round=rnd,
                        line=view.line("pipeline.relay"),
                        message=f"stage {cls.stage} sends {what} before its {later[0].op} of "
                        f"{later[0].what or later[0].compute}: the next stage computes on "
                        f"a buffer that was never filled", fix="receive, compute, then send"))
    return out


def _programs(view: PlanView) -> Programs:
    """(stage, busy) -> the op sequence over the simulated rounds."""
    rounds = ["startup", "prefill"] + ["decode"] * max(1, view.plan.in_flight)
    out: Programs = {}
    for cls in view.plan.rank_classes:
        stage = cls.stage
        for busy, given in ((True, cls.program), (False, cls.idle_program)):
            program: Program | None = given or (cls.program if not busy and _has_dp(view) else None)
            if program is None:
                continue
            out[(stage, busy)] = [(rnd, op) for rnd in rounds for op in _expand(program.round(rnd))]
    return out


def _has_dp(view: PlanView) -> bool:
    return view.plan.dp_agreement is not None


def _expand(ops: tuple[Op, ...]) -> list[Op]:
    out = []
    for op in ops:
        if op.op != "ring":
            out.append(op)
            continue
        if (peer := opt(op.recv_from)) is not None:
            out.append(replace(op, op="recv", peer_member=peer))
        if (peer := opt(op.send_to)) is not None:
            out.append(replace(op, op="send", peer_member=peer))
    return out


def _signature(op: Op) -> tuple:
    return (op.op, op.family, opt(op.bytes), opt(op.boundary), opt(op.site), opt(op.compute),
            opt(op.count), opt(op.what))


def _p2p_payload(op: Op) -> tuple:
    # Equal sizes are not enough: a send paired with the recv of another payload lands one
    # decision in the other's buffer, silently.
    return opt(op.bytes), opt(op.site), opt(op.what)


def _partners(view: PlanView, programs: Programs, cls: Cls, family: str,
              cache: _Partners) -> list[Cls]:
    """Classes whose ranks share `family` groups with class `cls`."""
    key = (cls, family)
    if key not in cache.found:
        digits = cache.digits
        stage, _ = cls
        if digits is None:  # a rule that is no partition (check_structure says so): list ranks
            groups = view.groups(family)
            stages = {view.stages[r] for g in groups if stage in {view.stages[x] for x in g} for r in g}
            cross = _has_dp(view) and view.spans_replicas(family)
        else:
            stages = _stages_sharing(view, digits, family, stage)
            cross = _has_dp(view) and bool(digits.group(family) - digits.group("replica"))
        cache.found[key] = [c for c in programs if c[0] in stages and (cross or c[1] == cls[1])]
    return cache.found[key]


def _stages_sharing(view: PlanView, digits: Digits, family: str, stage: int) -> set[int]:
    """The stages of the ranks that share a `family` group with some rank of `stage`: those
    that agree with it on every pp digit the family's groups do not run along."""
    along = digits.group(family)
    values = digits.stage_values(view.pp)
    mine = values[stage]
    return {t for t, v in enumerate(values) if all(v[d] == mine[d] for d in v if d not in along)}


def _simulate(view: PlanView, programs: Programs) -> list[Finding]:
    """Run every class until it blocks; a collective completes when all its partners wait on it.

    Event-driven: a class that blocks registers under its collective's key (family and the
    partner classes, or the sender/receiver pair of a p2p op); the last arrival checks the
    signatures and releases everyone. Linear in ops times partners.
    """
    pos = {c: 0 for c in programs}
    cache = _Partners(Digits.of(view.families, view.world_size))  # partners by (class, family)
    waiting: dict[tuple[object, ...], dict[Cls, Op]] = {}
    ready = deque(programs)
    while ready:
        cls = ready.popleft()
        if pos[cls] >= len(programs[cls]):
            continue
        rnd, op = programs[cls][pos[cls]]
        key, partners = _meet(view, programs, cls, op, cache)
        arrived = waiting.setdefault(key, {})
        arrived[cls] = op
        if len(arrived) < len(partners):
            continue
        del waiting[key]
        bad = _first_mismatch(arrived)
        if bad is not None:
            ref, other = bad
            return [_mismatch(view, rnd, ref, arrived[ref], other, arrived[other])]
        for p in partners:
            pos[p] += 1
            ready.append(p)
    if all(pos[c] >= len(programs[c]) for c in programs):
        return []
    return [_deadlock(view, programs, pos)]


def _meet(view: PlanView, programs: Programs, cls: Cls, op: Op,
          cache: _Partners) -> tuple[tuple[object, ...], list[Cls]]:
    """The key under which `op` meets its partners, and those partners (cls included)."""
    if op.op in P2P:
        peer = (given(op.peer_member), cls[1])
        if peer not in programs:
            peer = (given(op.peer_member), True)
        pair = (cls, peer) if op.op == "send" else (peer, cls)
        return ("p2p",) + pair, [cls, peer]
    partners = _partners(view, programs, cls, given(op.family), cache)
    return ("coll", op.family, tuple(partners)), partners


def _first_mismatch(arrived: dict[Cls, Op]) -> tuple[Cls, Cls] | None:
    """(reference class, differing class), the reference being the lowest class, or None."""
    ref, *others = sorted(arrived)
    op = arrived[ref]
    if op.op in P2P:
        if not others:
            return None
        pop = arrived[others[0]]
        paired = {op.op, pop.op} == {"send", "recv"}
        return None if paired and _p2p_payload(pop) == _p2p_payload(op) else (ref, others[0])
    for other in others:
        pop = arrived[other]
        if pop.op in P2P or _signature(pop) != _signature(op):
            return ref, other
    return None


def _describe(cls: Cls, op: Op) -> str:
    who = f"stage {cls[0]}" + ("" if cls[1] else " (idle DP rank)")
    what = op_site(op) or op.what or op.compute or ""
    size = f" ({op.bytes} bytes)" if opt(op.bytes) is not None else ""
    return f"{who} at {op.op} on {op.family} [{what}]{size}"


def _mismatch(view: PlanView, rnd: str, a: Cls, op: Op, b: Cls, other: Op) -> Finding:
    idle = not a[1] or not b[1]
    fix = ("idle DP ranks must run every forward and collective as dummy passes (sync.idle_ranks: dummy)"
           if idle else "give every member of the group the same ops in the same order")
    return Finding(severity="ERROR", site=op_site(op), group=opt(op.family), round=rnd,
                   line=view.line("sync.idle_ranks") if idle else view.line("pipeline.relay"),
                   message=f"members of one {op.family} group disagree: {_describe(a, op)} while "
                   f"{_describe(b, other)}; the collective mismatches and hangs", fix=fix)


def _deadlock(view: PlanView, programs: Programs, pos: dict[Cls, int]) -> Finding:
    waiting = [_describe(c, programs[c][pos[c]][1]) for c in programs if pos[c] < len(programs[c])]
    rnd = next(programs[c][pos[c]][0] for c in programs if pos[c] < len(programs[c]))
    return Finding(severity="ERROR", round=rnd,
                   line=view.line("pipeline.relay"),
                   message="deadlock: no collective can complete: " + "; ".join(waiting),
                   fix="order the collectives the same way on every member of each group")


def op_site(op: Op) -> str | None:
    """The site(s) an op serves: a relay names one site, a fused boundary several."""
    if op.site:
        return op.site
    return ",".join(op.sites) if op.sites else None
