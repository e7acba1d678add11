"""The one place that starts torch.distributed and creates process groups: for the runtime
(bind), for simulate's ranks (through bind) and for the deployment simulator's (sim/handoff.py).

The backend is the plan's (plan.json `backend`: topology.backend, else the device's, fixed once
by plan/build.py); nothing here works it out again. new_group is collective: every rank of the
world creates every group, in one order, whether or not it is a member.

Worked example, 8 ranks of a tp 4 x pp 2 plan: `new_groups([[0, 1, 2, 3], [4, 5, 6, 7]], 5, ...)`
creates both tp groups on all 8 ranks and returns rank 5's, [4..7]; the pp family's
[0, 4] .. [3, 7] follow on every rank.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
import os

import torch.distributed as dist

from specplan.runtime.errors import CollectiveTimeout, WorldSizeMismatch
from specplan.runtime.plan_view import PlanView


def start_world(backend: str, rank: int, world_size: int, timeout_s: float, *,
                init_method: str | None = None, store: dist.Store | None = None) -> None:
    """Join the default process group of `world_size` ranks over `backend`."""
    dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=world_size,
                            timeout=datetime.timedelta(seconds=timeout_s), store=store)


def new_groups(groups: Iterable[list[int]], rank: int, timeout_s: float,
               backend: str | None = None) -> dist.ProcessGroup | None:
    """Create every group of `groups` (lists of global ranks), in order, on this rank; return the
    one holding `rank`, or None. `backend` None: the default process group's."""
    own = None
    timeout = datetime.timedelta(seconds=timeout_s)
    for members in groups:
        pg = dist.new_group(members, timeout=timeout, backend=backend)
        if rank in members:
            own = pg
    return own


def start_process_group(plan: PlanView, rank: int | None, world_size: int | None,
                        rendezvous_s: float | None = None) -> None:
    """Initialize torch.distributed from arguments or the torchrun environment, if not done,
    with the plan's backend.

    The rendezvous waits `rendezvous_s` (default: runtime.timeout_s) for every rank: a loaded
    machine may take long to start them, which is not a collective's hang."""
    if dist.is_initialized():
        return
    rank = int(os.environ["RANK"]) if rank is None else rank
    world_size = int(os.environ["WORLD_SIZE"]) if world_size is None else world_size
    if world_size != plan.world_size:
        raise WorldSizeMismatch(
            f"at process-group start: plan {plan.name} (fingerprint {plan.fingerprint[:16]}) is "
            f"for {plan.world_size} ranks, but rank {rank} was started in a world of {world_size}")
    wait = plan.timeout_s if rendezvous_s is None else rendezvous_s
    store = _store(rank, world_size, wait, rendezvous_s)
    try:
        start_world(plan.backend, rank, world_size, plan.timeout_s, store=store)
    except (RuntimeError, dist.DistError) as exc:
        raise CollectiveTimeout(
            f"at process-group start: not every one of {world_size} ranks joined within "
            f"{wait:g}s (this is rank {rank}): the machine was too slow to start them all (the "
            f"rendezvous waits runtime.timeout_s; raise it on a loaded machine), or a rank "
            f"stopped before it joined (its own error says why): "
            f"{str(exc).splitlines()[0]}") from exc


def _store(rank: int, world_size: int, wait: float, rendezvous_s: float | None):
    """A TCP store of its own timeout for a rendezvous longer than the collectives' timeout
    (MASTER_ADDR / MASTER_PORT, not under a torchrun agent); None: init_process_group's own."""
    env = os.environ
    if rendezvous_s is None or "MASTER_ADDR" not in env or "TORCHELASTIC_RUN_ID" in env:
        return None
    try:
        return dist.TCPStore(env["MASTER_ADDR"], int(env["MASTER_PORT"]), world_size, rank == 0,
                             timeout=datetime.timedelta(seconds=wait))
    except (RuntimeError, dist.DistError, KeyError, ValueError) as exc:
        raise CollectiveTimeout(
            f"at process-group start: rank {rank} found no rendezvous at "
            f"{env.get('MASTER_ADDR')}:{env.get('MASTER_PORT')} within {wait:g}s: the machine was "
            f"too slow to start every rank (raise runtime.timeout_s): {str(exc).splitlines()[0]}") from exc


def create_groups(plan: PlanView, adopted: dict | None = None) -> tuple[dict, dict]:
    """Every group of every family not adopted, in plan order; returns this rank's (group, ranks)
    per family. A family with `alias`, or whose groups are exactly an adopted family's (the
    replica under DP-attention is attn_tp), reuses that communicator instead of a new one."""
    rank = dist.get_rank()
    adopted = adopted or {}
    groups: dict[str, dist.ProcessGroup | None] = {}
    ranks: dict[str, list[int]] = {}
    for name, fam in plan.families.items():
        ranks[name] = plan.group_of(name, rank)
        reused = _reused(plan, name, groups, adopted)
        if reused is not None:
            groups[name] = reused
            continue
        if fam.group_size == plan.world_size:
            groups[name] = dist.group.WORLD
            continue
        groups[name] = new_groups(fam.groups(), rank, plan.timeout_s, plan.backend)
    return groups, ranks


def _reused(plan: PlanView, name: str, groups: dict, adopted: dict):
    """The communicator a family reuses (its own adopted group, its alias's, an equal adopted
    family's), or None when it needs its own groups. The same answer on every rank."""
    if name in adopted:
        return adopted[name]
    alias = plan.families[name].alias
    if alias and (alias in groups or alias in adopted):
        return groups.get(alias, adopted.get(alias))
    mine = plan.families[name].groups()
    return next((adopted[o] for o in sorted(adopted) if plan.families[o].groups() == mine), None)
