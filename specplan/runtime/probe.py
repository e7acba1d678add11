"""The agreement probe: every rank of a replica compares a 64-bit hash of each decision it holds.

The vector is fixed by the plan, so every rank exchanges the same bytes: [round, fingerprint,
one slot per decision the plan names (converged or not, so policy `off` is checked too),
one slot for the engine's other decisions]. A slot that differs names its decision; the ranks
then gather that decision's leading values so the error shows what differs.

What does not change per probe is made once at bind (`ProbeState`): the slot names, the
vector and the receive matrix. The exchange gives every rank every rank's vector: on NCCL one
`all_gather_into_tensor`; on gloo, whose all-gather is a ring of n - 1 dependent steps, a
gather to the group's first rank and one broadcast of the gathered matrix (two flat
collectives, the same result everywhere, several times cheaper at 4 and 8 ranks).
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from specplan.runtime.errors import ProbeMismatch
from specplan.runtime.hashing import hash64, preview
from specplan.runtime.plan_view import GuardedCollective

ABSENT = 0  # a decision this rank does not hold this round
_PROBE = GuardedCollective(-2, "-", "replica", "probe", 0, ("the agreement probe",), (), 0, 0)


class ProbeState:
    """The probe's per-runtime constants, made once at bind."""

    def __init__(self, rt):
        self.names = list(dict.fromkeys(d for _, d in rt.plan.decisions()))
        self.known = frozenset(self.names)
        self.columns = ["round", "fingerprint"] + self.names + ["<other decisions>"]
        fam = "replica" if "replica" in rt.groups else None
        self.group = rt.groups.get(fam) if fam else None
        self.ranks = rt.ranks.get(fam, [rt.rank]) if fam else [rt.rank]
        width, n = len(self.columns), len(self.ranks)
        self.fingerprint = rt.plan.fingerprint64
        self.row = [0] * width
        self.mine = torch.zeros(width, dtype=torch.int64)
        self.rows = torch.zeros(n, width, dtype=torch.int64)
        self.split = list(self.rows.unbind(0))
        self.gather_to_first = rt.backend == "gloo"


def _vector(st: ProbeState, round_: int, decisions: dict) -> dict:
    """Fill st.row in place; returns the hashes of the decisions the plan does not name."""
    extras = {k: hash64(v) for k, v in sorted(decisions.items()) if k not in st.known}
    row = st.row
    row[0], row[1] = round_, st.fingerprint
    for i, n in enumerate(st.names, start=2):
        held = decisions.get(n)
        row[i] = hash64(held) if held is not None else ABSENT
    row[-1] = hash64(torch.tensor(list(extras.values()), dtype=torch.int64)) if extras else ABSENT
    return extras


def run_probe(rt, round_: int, decisions: dict) -> None:
    rt.check_round()  # the device path's flag first: a desync names its site, not a hash
    st: ProbeState = rt._probe
    ranks = st.ranks
    if len(ranks) == 1:
        return
    extras = _vector(st, round_, decisions)
    rows = _exchange(rt, st, round_)
    for col, name in enumerate(st.columns):
        values = [row[col] for row in rows]
        if len(set(values)) == 1:
            continue
        if name == "<other decisions>":
            name = _first_extra(rt, extras, st.group, ranks, round_)
        raise ProbeMismatch(_message(rt, round_, name, values, ranks, decisions, st.group))


def _exchange(rt, st: ProbeState, round_: int) -> list[list[int]]:
    """Every rank's row, on every rank of the replica."""
    mine = st.mine
    mine.copy_(torch.tensor(st.row, dtype=torch.int64))
    if st.gather_to_first:
        first = st.ranks[0]
        work = dist.gather(mine, st.split if rt.rank == first else None, dst=first,
                           group=st.group, async_op=True)
        rt._wait(work, _PROBE, round_)
        rt._wait(dist.broadcast(st.rows, src=first, group=st.group, async_op=True), _PROBE, round_)
        return st.rows.tolist()
    dev_rows = st.rows.to(rt.device)
    # Flat output: gloo (an engine's CPU group adopted at bind) splits a 2-D one into [1, width]
    # chunks and refuses them against the [width] input; NCCL takes either.
    work = dist.all_gather_into_tensor(dev_rows.view(-1), mine.to(rt.device), group=st.group, async_op=True)
    rt._wait(work, _PROBE, round_)
    return dev_rows.tolist()


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
