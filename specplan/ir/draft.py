"""The plan's draft: the typed, mutable objects the passes fill, one per object of plan.json.

The objects a pass makes whole and no later pass changes are the plan's own (ir/records.py:
Layout, Field, Unfused, Drafter, TapProducers, Link, Routing, SampledRows, DpAgreement,
MoeRows, RankClass, Program, Op); the draft holds them as they are. Each class here has the fields of its plan.json object (specplan/plan/model.py), in the same order
and under the same names, so plan/build.py hands a draft to the plan's one reader as it is (a
draft object reads as the JSON object it becomes) and nothing is re-assembled by key. A field
a later pass fills starts `ABSENT`; the pass contracts (passes/contracts.py) name these
attributes and check, around every pass, that what a pass ensures is no longer ABSENT.
`SiteDraft` alone differs from its plan object: it keeps the decisions' names and whether the
site fires at start-up, and build.py turns the names into the plan's sized decisions.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from specplan.engines.choices import PayloadWidth, RelayMode
from specplan.ir.codec import ABSENT, Absent
from specplan.ir.nodes import Round
from specplan.ir.records import (ConvergeOp, DpAgreement, Drafter, Gate, Layout, MoeRows, RankClass,
                                 Routing, SampledRows, SiteReaders, TapProducers, Unfused)
from specplan.mesh import Family
from specplan.mesh.pipeline import Stage
from specplan.methods.base import SiteKind


@dataclass
class SiteDraft:
    """assign_groups fills the site and its group; insert_converges `converge`, `reason` and
    `trivial`; fuse_converges `boundary` (None: the site has none)."""

    name: str
    round: Round
    phase: str
    kind: SiteKind
    decisions: tuple[str, ...]
    family: str
    source_member: int
    readers: SiteReaders
    startup: bool
    converge: bool | Absent = ABSENT
    reason: str | Absent = ABSENT
    trivial: bool | Absent = ABSENT
    boundary: int | None = None


@dataclass
class BoundaryDraft:
    """fuse_converges makes it; pin_widths lays it out and sizes its buffer."""

    id: int
    round: Round
    family: str
    source_member: int
    op: ConvergeOp
    sites: list[str]
    layout: Layout | Absent = ABSENT
    buffer_bytes: int | Absent = ABSENT


@dataclass
class RelayDraft:
    """pipeline_stages makes it; share_buffers (pin_widths) sizes its buffer."""

    site: str
    round: Round
    mode: RelayMode
    family: str
    source_member: int
    bytes: int
    width: PayloadWidth
    id: int
    layout: Layout
    buffer_bytes: int | Absent = ABSENT


@dataclass
class RelaysDraft:
    mode: RelayMode
    relay_drafts: bool
    payload_width: PayloadWidth
    sites: list[RelayDraft]
    sampled_rows: SampledRows | None


@dataclass
class PipelineDraft:
    stages: tuple[Stage, ...]  # the mesh's own stages: the same four fields as plan.json's
    drafter: Drafter | None
    taps: tuple[TapProducers, ...]
    tap_ids: str
    aux_routing: str
    routing: Routing
    relay: RelaysDraft
    handoff_bytes: int


@dataclass
class Draft:
    """The plan-level facts the passes record, each ABSENT until its pass fills it (Plan's
    fields, in its order, and `pp`, which the IR checks read). Optional facts a pass decides
    against (no DP agreement, no MoE) are None, not ABSENT."""

    pp: int | Absent = ABSENT
    families: dict[str, Family] | Absent = ABSENT
    sites: dict[str, SiteDraft] | Absent = ABSENT
    gates: list[Gate] | Absent = ABSENT
    boundaries: list[BoundaryDraft] | Absent = ABSENT
    buffer_bytes: dict[str, int] | Absent = ABSENT
    unfused: list[Unfused] | Absent = ABSENT
    pipeline: PipelineDraft | Absent = ABSENT
    dp_agreement: DpAgreement | None | Absent = ABSENT
    moe: MoeRows | None | Absent = ABSENT
    rank_classes: list[RankClass] | Absent = ABSENT
    in_flight: int | Absent = ABSENT

    def filled(self) -> list[str]:
        """The names of the facts some pass has filled, in field order."""
        return [f.name for f in fields(self) if getattr(self, f.name) is not ABSENT]


__all__ = ["ABSENT", "BoundaryDraft", "Draft", "PipelineDraft", "RelayDraft", "RelaysDraft", "SiteDraft"]
