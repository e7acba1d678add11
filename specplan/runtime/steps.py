"""The steps a generated runtime module calls: one plain function per node of a round program.

`specplan compile` lowers each rank class's round program to a torch.fx graph whose
call_function nodes are these functions, with the boundary id or relayed site baked in as an
argument; the emitted `runtime_<name>.py` calls them by name. Each takes the bound `Runtime` first and the engine's local decisions as keyword
arguments (None where this rank holds none: a converge's non-source members, a relay's earlier
stages), and returns a fresh dict of decision -> tensor, so a graph's edges show which
decision feeds which collective. Families, sources and layouts are read from the bound plan,
never passed: the fingerprint check at the head of every program guarantees the bound plan is
the one the module was generated from.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from specplan.runtime.errors import FingerprintMismatch
from specplan.runtime.runtime import (Accepted, Runtime, accept_site, accept_sites, derive_commit, fired,
                                     wait_for)

def check_plan(rt: Runtime, fingerprint: str) -> None:
    """Refuse a Runtime bound to another plan than the one a module was generated from."""
    if rt.plan.fingerprint == fingerprint:
        return
    raise FingerprintMismatch(
        f"runtime module generated for plan fingerprint {fingerprint} but rank {rt.rank} bound "
        f"plan {rt.plan.name} with fingerprint {rt.plan.fingerprint}; re-run `specplan compile` "
        f"and import the runtime module written beside that plan.json")


def converge_boundary(rt: Runtime, boundary: int, *, round: int, live_rows: int,
                      **values: torch.Tensor | None) -> dict:
    """One fused converge: every member of this rank's group gets the source's values."""
    return rt.converge(boundary, _held(values), round=round, live_rows=live_rows)


def relay_site(rt: Runtime, site: str, *, round: int, live_rows: int,
               **values: torch.Tensor | None) -> dict:
    """Carry a last-stage site's decisions to the earlier stages (only the source sends)."""
    relay = rt.plan.relay_of(site)
    assert relay is not None, f"the plan relays no site {site!r}"
    source = rt.ranks[relay.family][relay.source_member]
    return rt.relay(site, _held(values) if rt.rank == source else None, round=round, live_rows=live_rows)


def exchange_token_counts(rt: Runtime, counts: torch.Tensor | None, *, round: int) -> torch.Tensor:
    """DP-attention's token-count exchange: [group size, ints_per_rank] int32 on every member,
    as plan.json's `dp_agreement` states it (family, op, ints per rank).

    An idle DP rank passes None and sends zeros (the dummy pass every member must still run).
    """
    dp = rt.plan.plan.dp_agreement
    assert dp is not None, "the plan has no dp_agreement (no DP-attention)"
    op, family, ints_per_rank = dp.op, dp.family, dp.ints_per_rank
    group, ranks = rt.groups[family], rt.ranks[family]
    mine = torch.zeros(ints_per_rank, dtype=torch.int32, device=rt.device)
    if counts is not None:
        mine.copy_(counts.reshape(-1).to(mine))
    out = torch.zeros(len(ranks), ints_per_rank, dtype=torch.int32, device=rt.device)
    if op == "all_gather":
        work = dist.all_gather(list(out.unbind(0)), mine, group=group, async_op=True)
    else:  # all_reduce: each member writes its own row of a zeroed table
        out[ranks.index(rt.rank)] = mine
        work = dist.all_reduce(out, group=group, async_op=True)
    _wait(rt, work, f"dp_token_counts ({op} over {family} {ranks}) at round {round}")
    return out


def finalize(rt: Runtime, site: str | None, *, live_rows: int, prefix_lens: torch.Tensor | None,
             draft_tokens: torch.Tensor | None = None, **decisions: torch.Tensor) -> Accepted | None:
    """What the accept site that fired commits, from converged decisions only (`Runtime.accept`
    without the converge, which the program already ran); None when the engine passed no
    prefix_lens. A round with alternative accept sites gets the fired one's name from the
    engine (`accept_site`); finalize reads that site's decisions only."""
    if prefix_lens is None:
        return None
    if site not in rt.plan.sites:
        choices = accept_sites(rt.plan.sites, "decode")
        raise ValueError(f"this round carries the alternative accept sites {list(choices)}: pass "
                         f"accept_site, the one that fired (found {site!r})")
    prefix = prefix_lens[:live_rows].to(rt.device, torch.int32)
    drafts = None if draft_tokens is None else draft_tokens[:live_rows].to(rt.device)
    name, mine = fired(rt.plan.sites, site, decisions)
    return derive_commit(accept_site(rt.plan.plan, name), mine, prefix, drafts)


def _held(values: dict) -> dict | None:
    held = {k: v for k, v in values.items() if v is not None}
    return held or None


def _wait(rt: Runtime, work: dist.Work, what: str) -> None:
    wait_for(work, what=what, timeout_s=rt.plan.timeout_s, rank=rt.rank)