"""Every rank of a world holds the same plan, or none does: the start-up agreement a plugin
runs right after the engine's world is up, before anything the plan guards.

A rank where SPECPLAN_PLAN is unset (a node started without it, a Ray worker the variable did
not reach) runs no plan and takes no part in the plan's collectives: its peers would wait on
it until a collective times out, or the world would serve half-guarded. So each rank writes
what it holds, its plan's fingerprint or "-", under its rank in the world's c10d store
(torch.distributed's default store, which every rank reaches once init_process_group has
returned) and waits, within a time bound, for every rank's entry. Every rank then reads the
same table and refuses alike, naming the ranks on each side: the plan's ranks within the plan's
runtime.timeout_s, a rank without a plan within PLANLESS_TIMEOUT_S. A rank that never writes
(no specplan plugin loaded there) is named by the others when the bound runs out; a world where
no rank holds a plan starts as it would without specplan.
"""

from __future__ import annotations

from datetime import timedelta

from typing import TYPE_CHECKING

from specplan.plugins.common import EngineRefused

if TYPE_CHECKING:
    from torch.distributed import Store

NONE = "-"  # what a rank without a plan writes
PLANLESS_TIMEOUT_S = 60.0  # how long a rank without a plan waits for its peers' entries
_PREFIX = "specplan/presence"


def agree(fingerprint: str | None, name: str | None, rank: int, world: int, timeout_s: float,
          store: Store | None = None) -> None:
    """Write this rank's entry, wait for all `world`, refuse (EngineRefused) unless every rank
    holds the plan of `fingerprint` or none does. `name`: the plan's, for the message."""
    if store is None:
        import torch.distributed as dist

        store = dist.distributed_c10d._get_default_store()
    call = store.add(f"{_PREFIX}/calls/{rank}", 1)  # a second start in one world: new keys
    keys = [f"{_PREFIX}/{call}/{r}" for r in range(world)]
    store.set(keys[rank], fingerprint or NONE)
    try:
        store.wait(keys, timedelta(seconds=timeout_s))
    except Exception:  # c10d's timeout (DistStoreError, a RuntimeError on older torch)
        pass
    held = {r: store.get(k).decode() for r, k in enumerate(keys) if store.check([k])}
    _read_by_all(store, f"{_PREFIX}/{call}", len(held), rank)
    why = refusal(held, world, fingerprint, timeout_s)
    if why:
        plan = f"plan {name!r}: " if name else ""
        raise EngineRefused(f"rank {rank}: {plan}{why}")


def _read_by_all(store, prefix: str, ranks: int, rank: int, bound_s: float = 30.0) -> None:
    """Leave only once every rank that wrote has read the table, rank 0 last: the store lives
    in rank 0's process, which a refusal ends (bounded waits: a peer that died reads nothing)."""
    import time

    end = time.monotonic() + bound_s

    def wait(key: str) -> None:
        store.add(key, 1)
        while store.add(key, 0) < ranks and time.monotonic() < end:
            time.sleep(0.01)

    wait(f"{prefix}/read")
    if rank == 0:
        wait(f"{prefix}/left")
    else:
        store.add(f"{prefix}/left", 1)  # this rank's last word to the store


def refusal(held: dict[int, str], world: int, fingerprint: str | None,
            timeout_s: float) -> str | None:
    """Why the world must not start, from the entries `held` (rank -> fingerprint or NONE)."""
    plans: dict[str, list[int]] = {}
    for r, value in sorted(held.items()):
        plans.setdefault(value, []).append(r)
    without = plans.pop(NONE, [])
    silent = [r for r in range(world) if r not in held]
    if not plans and fingerprint is None:
        return None  # nobody holds a plan: the engine as it is
    parts = []
    if len(plans) > 1:
        parts.append("different plans: " + ", ".join(
            f"fingerprint {fp[:16]} on {_ranks(rs)}" for fp, rs in plans.items()))
    if plans and without:
        parts.append(f"no plan on {_ranks(without)} (SPECPLAN_PLAN unset there), a plan on "
                     f"{_ranks(sorted(r for rs in plans.values() for r in rs))}")
    if silent:
        parts.append(f"no word within {timeout_s:g} s from {_ranks(silent)} (no specplan "
                     "plugin loaded there?)")
    if not parts:
        return None
    return "; ".join(parts) + ": a world runs the same plan on every rank, or none"


def _ranks(ranks: list[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))
