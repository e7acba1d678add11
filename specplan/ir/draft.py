"""The plan's draft: the typed, mutable objects the passes fill, one per object of plan.json.

Each class has the fields of its plan.json object (specplan/plan/model.py), in the same order
and under the same names, so plan/build.py hands a draft to the plan's one reader as it is (a
draft object reads as the JSON object it becomes) and nothing is re-assembled by key. A field
a later pass fills starts `ABSENT`; the pass contracts (passes/contracts.py) name these
attributes and check, around every pass, that what a pass ensures is no longer ABSENT.
`SiteDraft` alone differs from its plan object: it keeps the decisions' names and whether the
site fires at start-up, and build.py turns the names into the plan's sized decisions.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from specplan.ir.nodes import Round
from specplan.mesh import Family
from specplan.mesh.pipeline import Stage


class _Absent:
    """A value not given: a key plan.json leaves out (null is None), or one no pass filled yet."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self):
        return (_Absent, ())


ABSENT = _Absent()


@dataclass
class SiteDraft:
    """assign_groups fills the site and its group; insert_converges `converge`, `reason` and
    `trivial`; fuse_converges `boundary` (None: the site has none)."""

    name: str
    round: Round
    phase: str
    kind: str
    decisions: tuple[str, ...]
    family: str
    source_member: int
    readers: str
    startup: bool
    converge: bool = ABSENT
    reason: str = ABSENT
    trivial: bool = ABSENT
    boundary: int | None = None


@dataclass(frozen=True)
class FieldDraft:
    site: str
    decision: str
    dtype: str
    shape: tuple[int, ...]
    symbols: tuple[str, ...]
    offset: int
    bytes: int


@dataclass(frozen=True)
class LayoutDraft:
    header: tuple[tuple[str, str, int], ...]
    header_bytes: int
    capacity_rows: int
    fields: tuple[FieldDraft, ...]
    bytes: int


@dataclass
class BoundaryDraft:
    """fuse_converges makes it; pin_widths lays it out and sizes its buffer."""

    id: int
    round: Round
    family: str
    source_member: int
    op: str
    sites: list[str]
    layout: LayoutDraft = ABSENT
    buffer_bytes: int = ABSENT


@dataclass(frozen=True)
class UnfusedDraft:
    after: str
    before: str
    family: str
    dependency: tuple[str, ...]


@dataclass(frozen=True)
class DrafterDraft:
    stage: int
    pipeline_size: int
    tp: int
    layer_ids: tuple[int, ...]
    numbering: str
    kind: str
    target_layers: tuple[int, int]


@dataclass(frozen=True)
class TapDraft:
    tap: int
    producers: tuple[int, ...]


@dataclass(frozen=True)
class LinkDraft:
    link: tuple[int, int]
    taps: int
    bytes: int
    messages: int
    note: str = ABSENT


@dataclass(frozen=True)
class RoutingDraft:
    chain: tuple[LinkDraft, ...]
    direct: tuple[LinkDraft, ...]


@dataclass
class RelayDraft:
    """pipeline_stages makes it; share_buffers (pin_widths) sizes its buffer."""

    site: str
    round: Round
    mode: str
    family: str
    source_member: int
    bytes: int
    width: str
    id: int
    layout: LayoutDraft
    buffer_bytes: int = ABSENT


@dataclass(frozen=True)
class SampledRowsDraft:
    discount: str
    discount_tokens: int | None
    rule: str


@dataclass
class RelaysDraft:
    mode: str
    relay_drafts: bool
    payload_width: str
    sites: list[RelayDraft]
    sampled_rows: SampledRowsDraft | None


@dataclass
class PipelineDraft:
    stages: tuple[Stage, ...]  # the mesh's own stages: the same four fields as plan.json's
    drafter: DrafterDraft | None
    taps: tuple[TapDraft, ...]
    tap_ids: str
    aux_routing: str
    routing: RoutingDraft
    relay: RelaysDraft
    handoff_bytes: int


@dataclass(frozen=True)
class DpAgreementDraft:
    family: str
    op: str
    ints_per_rank: int
    bytes: int
    forwards_per_round: dict[str, int]
    idle_ranks: str
    why: str


@dataclass(frozen=True)
class MoeDraft:
    a2a: str
    dispatch_family: str
    row_split: bool
    gather_family: str | None
    rows_per_rank: int
    gather_bytes_per_layer: int


@dataclass
class OpDraft:
    """One step of a rank class's program; the keys it leaves ABSENT are not written."""

    op: str
    compute: str = ABSENT
    family: str = ABSENT
    count: int = ABSENT
    rows: int = ABSENT
    peer_member: int = ABSENT
    bytes: int | None = ABSENT
    boundary: int = ABSENT
    site: str = ABSENT
    source_member: int = ABSENT
    sites: tuple[str, ...] = ABSENT
    recv_from: int | None = ABSENT
    send_to: int | None = ABSENT
    what: str = ABSENT
    per_layer: bool = ABSENT


@dataclass(frozen=True)
class ProgramDraft:
    startup: tuple[OpDraft, ...]
    prefill: tuple[OpDraft, ...]
    decode: tuple[OpDraft, ...]


@dataclass(frozen=True)
class RankClassDraft:
    id: int
    rule: dict[str, int]
    program: ProgramDraft
    idle_program: ProgramDraft = ABSENT


@dataclass
class Draft:
    """The plan-level facts the passes record, each ABSENT until its pass fills it (Plan's
    fields, in its order, and `pp`, which the IR checks read). Optional facts a pass decides
    against (no DP agreement, no MoE) are None, not ABSENT."""

    pp: int = ABSENT
    families: dict[str, Family] = ABSENT
    sites: dict[str, SiteDraft] = ABSENT
    boundaries: list[BoundaryDraft] = ABSENT
    buffer_bytes: dict[str, int] = ABSENT
    unfused: list[UnfusedDraft] = ABSENT
    pipeline: PipelineDraft = ABSENT
    dp_agreement: DpAgreementDraft | None = ABSENT
    moe: MoeDraft | None = ABSENT
    rank_classes: list[RankClassDraft] = ABSENT
    in_flight: int = ABSENT

    def filled(self) -> list[str]:
        """The names of the facts some pass has filled, in field order."""
        return [f.name for f in fields(self) if getattr(self, f.name) is not ABSENT]


__all__ = ["ABSENT", "BoundaryDraft", "Draft", "DpAgreementDraft", "DrafterDraft", "FieldDraft",
           "LayoutDraft", "LinkDraft", "MoeDraft", "OpDraft", "PipelineDraft", "ProgramDraft",
           "RankClassDraft", "RelayDraft", "RelaysDraft", "RoutingDraft", "SampledRowsDraft",
           "SiteDraft", "TapDraft", "UnfusedDraft"]
