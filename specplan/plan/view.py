"""A bound plan's read-only view: families as rank lists, guarded collectives with typed fields.

Torch-free, so the verifier, the preflight, the lowering, the simulator and the trace tools
share it. Everything here is read from the Plan; nothing is computed that plan.json does not
state (layouts, header ids, buffer sizes are the planner's). A field's capacity shape is the
plan's (`bs` = max_batch); `live_shape` re-evaluates its symbols with `bs` set to the round's
live rows, which is a prefix of the capacity field because `bs` always leads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from specplan.ir.nodes import GUARD_HEADER
from specplan.mesh.family import Family
from specplan.methods.base import eval_dim
from specplan.plan.artifact import Plan
from specplan.plan.codec import ABSENT
from specplan.plan.load import PlanSource, load_plan
from specplan.plan.model import Field, Layout, Op, Site

HEADER_FIELDS = tuple(name for name, _, _ in GUARD_HEADER)
# One guarded collective of a program: a converge boundary by id, a relay by site, the DP op.
Step = tuple[Literal["boundary"], int] | tuple[Literal["relay"], str] | tuple[Literal["dp"], Op]


@dataclass(frozen=True)
class GuardedCollective:
    """One guarded collective as the runtime runs it: a fused converge or a pp relay."""

    id: int
    round: str
    family: str
    op: str  # broadcast | all_reduce_min | column | ring
    source_member: int
    sites: tuple[str, ...]
    fields: tuple[Field, ...]
    header_bytes: int
    buffer_bytes: int
    header: tuple[tuple[str, str, int], ...] = ()

    @property
    def decisions(self) -> tuple[str, ...]:
        return tuple(f.decision for f in self.fields)

    @property
    def label(self) -> str:
        return "+".join(self.sites)


def fingerprint_int64(hexdigest: str) -> int:
    """The header's fingerprint: the plan fingerprint's first 64 bits, as a signed int64."""
    value = int(hexdigest[:16], 16)
    return value - (1 << 64) if value >= 1 << 63 else value


def _collective(id_: int, round_: str, family: str, op: str, source_member: int,
                sites: tuple[str, ...], layout: Layout, buffer_bytes: int) -> GuardedCollective:
    return GuardedCollective(id_, round_, family, op, source_member, sites, layout.fields,
                             layout.header_bytes, buffer_bytes, layout.header)


class PlanView:
    """The plan with its lookups: `plan` (the typed Plan) plus the runtime's reading of it."""

    def __init__(self, plan: PlanSource) -> None:
        self.plan: Plan = load_plan(plan)
        p = self.plan
        self.name, self.fingerprint = p.name, p.fingerprint
        self.fingerprint64 = fingerprint_int64(self.fingerprint)
        self.world_size, self.backend, self.device = p.world_size, p.backend, p.device
        rt = p.runtime
        self.timeout_s: float = float(rt.timeout_s)
        self.trace_dir: str | None = rt.trace_dir
        self.probe_every: int = rt.probe_every
        self.batch_identity: bool = rt.batch_identity
        self.max_batch: int = rt.max_batch
        self.families: dict[str, Family] = p.family
        self.sites: dict[str, Site] = p.site
        self.boundaries = [_collective(b.id, b.round, b.family, b.op, b.source_member, b.sites,
                                       b.layout, b.buffer_bytes) for b in p.boundaries]
        self.relays = [_collective(r.id, r.round, r.family, r.mode, r.source_member, (r.site,),
                                   r.layout, r.buffer_bytes) for r in p.relays]
        self.symbols = p.symbols

    @property
    def raw(self) -> Plan:
        """The Plan (kept under its old name for code that reads it as a mapping)."""
        return self.plan

    # -- rank math -----------------------------------------------------------------------
    @property
    def pp(self) -> int:
        return self.plan.pp

    @property
    def last(self) -> int:
        """The last pipeline stage (where draft, verify and accept decisions are made)."""
        return self.plan.pp - 1

    @property
    def stages(self) -> list[int]:
        return self.plan.stages

    @property
    def replicas(self) -> list[int]:
        return self.plan.replicas

    def stage_of(self, rank: int) -> int:
        """The pipeline stage of a global rank (its group rank in the pp family)."""
        return self.families["pp"].locate(rank)[1]

    def groups(self, family: str) -> list[list[int]]:
        return self.plan.groups(family)

    def group_of(self, family: str, rank: int) -> list[int]:
        return self.plan.group_of(family, rank)

    def spans_replicas(self, family: str) -> bool:
        rep = self.replicas
        return any(len({rep[r] for r in g}) > 1 for g in self.groups(family))

    def line(self, *keys: str) -> int | None:
        return self.plan.line(*keys)

    # -- guarded collectives -------------------------------------------------------------
    def family_buffer_bytes(self) -> dict[str, int]:
        """Per family, the one buffer its collectives share: plan.json's `buffer_bytes`, and
        for a family only MIN reductions use, the largest of their own sizes."""
        sizes = dict(self.plan.buffer_bytes)
        for b in self.boundaries + self.relays:
            sizes[b.family] = max(sizes.get(b.family, 0), b.buffer_bytes)
        return sizes

    def boundary_of(self, target: int | str) -> GuardedCollective:
        """A boundary by id, or by the name of a site it carries."""
        if isinstance(target, int):
            return self.boundaries[target]
        site = self.sites.get(target)
        if site is None:
            raise KeyError(f"plan {self.name} has no site {target!r}; sites: {sorted(self.sites)}")
        if site.boundary is None:
            raise KeyError(f"site {target!r} has no converge boundary")
        return self.boundaries[site.boundary]

    def relay_of(self, site: str) -> GuardedCollective | None:
        return next((r for r in self.relays if r.sites == (site,)), None)

    def live_shape(self, f: Field, live_rows: int) -> tuple[int, ...]:
        if not f.symbols:
            return f.shape
        symbols = dict(self.symbols, bs=live_rows)
        return tuple(eval_dim(s, symbols) for s in f.symbols)

    def decisions(self) -> list[tuple[str, str]]:
        """(site, decision) for every decision the plan names, converged or not, in plan order."""
        return [(s.name, d.name) for s in self.plan.sites for d in s.decisions]

    def program(self, stage: int, round_: str) -> list[Step]:
        """The guarded collectives of a stage's round, in schedule order: ("boundary", id),
        ("relay", site) or ("dp", the dp_agreement op)."""
        out: list[Step] = []
        for op in self.plan.rank_class(stage).program.round(round_):
            if op.boundary is not ABSENT:  # op.kind "boundary"
                out.append(("boundary", op.boundary))
            elif op.site is not ABSENT:  # op.kind "relay"
                out.append(("relay", op.site))
            elif op.kind == "dp":
                out.append(("dp", op))
        return out
