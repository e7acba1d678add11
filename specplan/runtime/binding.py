"""bind(): join the process group, agree on the plan, adopt or create every group of the plan
(runtime/comm.py starts the process group and creates the groups; this module checks them).

Order matters and is the same on every rank: (1) start or reuse the default process group,
(2) all ranks exchange (plan world size, plan fingerprint, which families the caller adopts and
whether their ranks are the plan's) and refuse to go on unless they all match, (3) every family
not adopted is created in plan order (torch.distributed.new_group is collective, so every rank
creates every remaining group in one global order, whatever it adopted), a family with `alias`,
or with exactly the groups of an adopted family, reusing those communicators.
Worked example, 8 ranks of a tp 4 x pp 2 plan: families tp [0..3][4..7], pp [0,4]..[3,7],
replica [0..7]; rank 5 holds group tp [4..7], pp [1,5], replica [0..7]. An engine that passes
groups={"tp": its tp group} adopts tp; pp's four groups are created on all 8 ranks, replica
is the world.
"""

from __future__ import annotations

import hashlib
import os

import torch
import torch.distributed as dist

from specplan.runtime.errors import FingerprintMismatch, GroupMismatch, WorldSizeMismatch
from specplan.runtime.plan_view import PlanView


def default_device(plan: PlanView) -> torch.device:
    if plan.device == "cpu":
        return torch.device("cpu")
    local = int(os.environ.get("LOCAL_RANK", "0"))
    kind = "npu" if plan.device == "npu" else "cuda"
    return torch.device(kind, local)


HOT_PATHS = ("auto", "host", "device")


def hot_path_for(hot_path: str, device: torch.device) -> str:
    """"device" on CUDA / NPU (no host synchronisation per converge), "host" on a CPU."""
    if hot_path not in HOT_PATHS:
        raise ValueError(f"hot_path must be one of {HOT_PATHS}, found {hot_path!r}")
    if hot_path != "auto":
        return hot_path
    return "device" if device.type in ("cuda", "npu") else "host"


def group_ranks(group: dist.ProcessGroup | None) -> list[int] | None:
    """The global ranks of a process group in group-rank order; None when this rank is not in it."""
    if group is None or group == dist.GroupMember.NON_GROUP_MEMBER:
        return None
    try:
        return dist.get_process_group_ranks(group)
    except (ValueError, RuntimeError):
        return None


def check_adopted(plan: PlanView, given: dict | None) -> tuple[dict, list[str]]:
    """The groups the caller hands over (family -> this rank's group), and what is wrong with them.

    Checked locally only; `agree_on_plan` makes every rank learn every rank's verdict, so a
    wrong group refuses the bind on every rank at once instead of hanging the others.
    """
    rank, problems = dist.get_rank(), []
    for name, group in sorted((given or {}).items()):
        if name not in plan.families:
            problems.append(f"{name}: not a family of plan {plan.name} (its families: "
                            f"{', '.join(plan.families)})")
            continue
        got, want = group_ranks(group), plan.group_of(name, rank)
        if got != want:
            shown = "no group containing it" if got is None else f"a group of ranks {got}"
            problems.append(f"{name}: rank {rank} was handed {shown}, the plan's group for rank "
                            f"{rank} is {want}")
    return dict(given or {}), problems


def _names_digest(names) -> int:
    return int.from_bytes(hashlib.blake2b(",".join(sorted(names)).encode(), digest_size=7).digest(), "little")


def agree_on_plan(plan: PlanView, device: torch.device, adopted: dict | None = None,
                  problems: list[str] | tuple = ()) -> None:
    """Every rank gathers every rank's (world size, fingerprint, adopted families, group
    problems) in one all-gather; any difference raises on every rank."""
    rank, world = dist.get_rank(), dist.get_world_size()
    digest = bytes.fromhex(plan.fingerprint)
    row = [plan.world_size] + list(digest) + [_names_digest(adopted or {}), len(problems)]
    mine = torch.tensor(row, dtype=torch.int64, device=device)
    gathered = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(gathered, mine)
    rows = [g.tolist() for g in gathered]
    sizes = {r: row[0] for r, row in enumerate(rows)}
    if len(set(sizes.values())) > 1 or plan.world_size != world:
        listing = ", ".join(f"rank {r}: {n} ranks" for r, n in sizes.items())
        raise WorldSizeMismatch(
            f"at process-group start: the process group has {world} ranks but the plans are "
            f"for different world sizes ({listing})")
    prints = {r: bytes(row[1:-2]).hex() for r, row in enumerate(rows)}
    other = next((r for r, fp in prints.items() if fp != prints[0]), None)
    if other is not None:
        raise FingerprintMismatch(
            f"plan fingerprints differ: rank 0 has {prints[0]}, rank {other} has {prints[other]} "
            f"(this is rank {rank}, plan {plan.name} {plan.fingerprint}); every rank must bind "
            f"the same plan.json")
    if len({row[-2] for row in rows}) > 1 or any(row[-1] for row in rows):
        _refuse_adoption(sorted(adopted or {}), list(problems), world)


def _refuse_adoption(names: list[str], problems: list[str], world: int) -> None:
    """Every rank takes this branch together (they all saw the same rows): gather the details."""
    everyone: list = [None] * world
    dist.all_gather_object(everyone, (names, problems))
    me = dist.get_rank()
    if len({tuple(n) for n, _ in everyone}) > 1:
        listing = "; ".join(f"rank {r} adopts {n}" for r, (n, _) in enumerate(everyone))
        raise GroupMismatch(
            f"bind: every rank must hand over the same families (torch.distributed.new_group is "
            f"collective, so every rank creates the rest in one order): {listing} (this is rank {me})")
    lines = [f"rank {r}: {p}" for r, (_, ps) in enumerate(everyone) for p in ps]
    mine = everyone[me][1]
    head = "; ".join(mine) if mine else f"this is rank {me}, whose groups match"
    raise GroupMismatch(f"bind refused the process groups handed to it: {head} (all ranks: "
                        f"{'; '.join(lines)})")
