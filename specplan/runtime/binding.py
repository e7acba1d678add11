"""bind(): join the process group, agree on the plan, create every group of the plan.

Order matters and is the same on every rank: (1) start or reuse the default process group,
(2) all ranks exchange (plan world size, plan fingerprint) and refuse to go on unless they all
match, (3) every family's groups are created in plan order (torch.distributed.new_group is
collective), a family with `alias` reusing the communicators of the family it names.
Worked example, 8 ranks of a tp 4 x pp 2 plan: families tp [0..3][4..7], pp [0,4]..[3,7],
replica [0..7]; rank 5 holds group tp [4..7], pp [1,5], replica [0..7].
"""

from __future__ import annotations

import datetime
import os

import torch
import torch.distributed as dist

from specplan.runtime.errors import CollectiveTimeout, FingerprintMismatch, WorldSizeMismatch
from specplan.runtime.plan_view import PlanView
from specplan.schema.model import DEVICE_BACKENDS



def backend_for(plan: PlanView) -> str:
    """plan.json's backend already honours topology.backend; else the device's."""
    return plan.backend or DEVICE_BACKENDS[plan.device]


def default_device(plan: PlanView) -> torch.device:
    if plan.device == "cpu":
        return torch.device("cpu")
    local = int(os.environ.get("LOCAL_RANK", "0"))
    kind = "npu" if plan.device == "npu" else "cuda"
    return torch.device(kind, local)


def start_process_group(plan: PlanView, rank, world_size, backend: str) -> None:
    """Initialize torch.distributed from arguments or the torchrun environment, if not done."""
    if dist.is_initialized():
        return
    rank = int(os.environ["RANK"]) if rank is None else rank
    world_size = int(os.environ["WORLD_SIZE"]) if world_size is None else world_size
    if world_size != plan.world_size:
        raise WorldSizeMismatch(
            f"at process-group start: plan {plan.name} (fingerprint {plan.fingerprint[:16]}) is "
            f"for {plan.world_size} ranks, but rank {rank} was started in a world of {world_size}")
    try:
        dist.init_process_group(backend, rank=rank, world_size=world_size,
                                timeout=datetime.timedelta(seconds=plan.timeout_s))
    except (RuntimeError, dist.DistError) as exc:
        raise CollectiveTimeout(
            f"at process-group start: not every one of {world_size} ranks joined within "
            f"{plan.timeout_s:g}s (this is rank {rank}); a rank whose plan is for another world "
            f"size refuses to start (plan {plan.name} is for {plan.world_size} ranks): "
            f"{str(exc).splitlines()[0]}") from exc


def agree_on_plan(plan: PlanView, device: torch.device) -> None:
    """Every rank gathers every rank's (world size, fingerprint); any difference raises."""
    rank, world = dist.get_rank(), dist.get_world_size()
    digest = bytes.fromhex(plan.fingerprint)
    mine = torch.tensor([plan.world_size] + list(digest), dtype=torch.int64, device=device)
    gathered = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(gathered, mine)
    rows = [g.tolist() for g in gathered]
    sizes = {r: row[0] for r, row in enumerate(rows)}
    if len(set(sizes.values())) > 1 or plan.world_size != world:
        listing = ", ".join(f"rank {r}: {n} ranks" for r, n in sizes.items())
        raise WorldSizeMismatch(
            f"at process-group start: the process group has {world} ranks but the plans are "
            f"for different world sizes ({listing})")
    prints = {r: bytes(row[1:]).hex() for r, row in enumerate(rows)}
    other = next((r for r, fp in prints.items() if fp != prints[0]), None)
    if other is None:
        return
    raise FingerprintMismatch(
        f"plan fingerprints differ: rank 0 has {prints[0]}, rank {other} has {prints[other]} "
        f"(this is rank {rank}, plan {plan.name} {plan.fingerprint}); every rank must bind "
        f"the same plan.json")


def create_groups(plan: PlanView, backend: str) -> tuple[dict, dict]:
    """Every group of every family, in plan order; returns this rank's (group, ranks) per family."""
    timeout = datetime.timedelta(seconds=plan.timeout_s)
    rank = dist.get_rank()
    groups, ranks = {}, {}
    for name, fam in plan.families.items():
        ranks[name] = plan.group_of(name, rank)
        if fam.alias and fam.alias in groups:
            groups[name] = groups[fam.alias]
            continue
        if fam.group_size == plan.world_size:
            groups[name] = dist.group.WORLD
            continue
        own = None
        for members in fam.groups():
            pg = dist.new_group(members, timeout=timeout, backend=backend)
            if rank in members:
                own = pg
        groups[name] = own
    return groups, ranks
