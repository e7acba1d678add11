"""The agreement probe: every rank of a replica all-gathers a 64-bit hash of each decision.

The vector is fixed by the plan, so every rank gathers the same bytes: [round, fingerprint,
one slot per decision the plan names (converged or not, so policy `off` is checked too),
one slot for the engine's other decisions]. A slot that differs names its decision; the ranks
then gather that decision's leading values so the error shows what differs.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from specplan.runtime.errors import ProbeMismatch
from specplan.runtime.hashing import hash64, preview
from specplan.runtime.plan_view import Boundary

ABSENT = 0  # a decision this rank does not hold this round


def _vector(rt, round_: int, decisions: dict) -> tuple[torch.Tensor, list[str], dict]:
    names = list(dict.fromkeys(d for _, d in rt.plan.decisions()))
    extras = {k: hash64(v) for k, v in sorted(decisions.items()) if k not in names}
    slots = [hash64(decisions[n]) if n in decisions else ABSENT for n in names]
    combined = hash64(torch.tensor(list(extras.values()) or [0], dtype=torch.int64)) if extras else ABSENT
    row = [round_, rt.plan.fingerprint64] + slots + [combined]
    return torch.tensor(row, dtype=torch.int64, device=rt.device), names + ["<other decisions>"], extras


def run_probe(rt, round_: int, decisions: dict) -> None:
    group, ranks = rt.groups["replica"], rt.ranks["replica"]
    if len(ranks) == 1:
        return
    mine, names, extras = _vector(rt, round_, decisions)
    rows = _gather(rt, mine, group, ranks, round_)
    for col, name in enumerate(["round", "fingerprint"] + names):
        values = [row[col] for row in rows]
        if len(set(values)) == 1:
            continue
        if name == "<other decisions>":
            name = _first_extra(rt, extras, group, ranks, round_)
        raise ProbeMismatch(_message(rt, round_, name, values, ranks, decisions, group))


def _gather(rt, mine, group, ranks, round_: int) -> list[list[int]]:
    out = [torch.empty_like(mine) for _ in ranks]
    probe = Boundary(-2, "-", "replica", "probe", 0, ("the agreement probe",), (), 0, 0)
    rt._wait(dist.all_gather(out, mine, group=group, async_op=True), probe, round_)
    return [o.tolist() for o in out]


def _first_extra(rt, extras: dict, group, ranks, round_: int) -> str:
    everyone: list = [None] * len(ranks)
    dist.all_gather_object(everyone, extras, group=group)
    keys = sorted({k for e in everyone for k in e})
    return next(k for k in keys if len({e.get(k) for e in everyone}) > 1)


def _message(rt, round_, name, values, ranks, decisions, group) -> str:
    by_value: dict[int, list[int]] = {}
    for rank, v in zip(ranks, values):
        by_value.setdefault(v, []).append(rank)
    held = decisions.get(name)
    shown = [None] * len(ranks)
    if name not in ("round", "fingerprint"):
        dist.all_gather_object(shown, preview(held) if held is not None else None, group=group)
    parts = []
    for v, rs in by_value.items():
        sample = shown[ranks.index(rs[0])]
        parts.append(f"ranks {rs}: hash {v & (2**64 - 1):016x}" + (f" values {sample}" if sample is not None else ""))
    return (f"agreement probe: decision {name} differs at round {round_} within replica "
            f"{ranks} (this is rank {rt.rank}): " + "; ".join(parts))
