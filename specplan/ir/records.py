"""The plan's leaf objects, which the passes draft as they are: one frozen dataclass per object
of plan.json that no later pass changes once it is made (a packed layout and its fields, an
unfused pair, the drafter, tap producers, tap routing, sampled rows, DP agreement, MoE rows,
each rank class's program and its ops).

specplan/plan/model.py holds the rest of the plan and names these as its own (plan.json's
shapes are read there); they live here, below passes/, so that the planner's draft
(ir/draft.py) holds the plan's own types instead of copies of them, and plan/build.py hands
them to the plan's one reader (ir/codec.py) as they are.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Literal

from specplan.engines.choices import Numbering
from specplan.ir.codec import ABSENT, Absent, JsonObject, Min
from specplan.methods.base import Dtype

Count = Annotated[int, Min(1)]
Index = Annotated[int, Min(0)]
Bytes = Annotated[int, Min(0)]
Ops = tuple["Op", ...]
A2a = Literal["none", "deepep"]  # the MoE all-to-all
ConvergeOp = Literal["broadcast", "all_reduce_min"]  # a fused converge's collective
SiteReaders = Literal["all_stages", "last_stage"]  # a site's: its decisions' widest readers


class Field(JsonObject):
    """One decision's place in a packed buffer, sized for capacity rows."""

    site: str
    decision: str
    dtype: Dtype
    shape: tuple[Index, ...]
    symbols: tuple[str, ...]
    offset: Index
    bytes: Bytes


class Layout(JsonObject):
    """A packed buffer: the guard header (guarded collectives), then 8-aligned fields."""

    header: tuple[tuple[str, Dtype, Index], ...]
    header_bytes: Bytes
    capacity_rows: Count
    fields: tuple[Field, ...]
    bytes: Bytes


class Unfused(JsonObject):
    after: str
    before: str
    family: str
    dependency: tuple[str, ...]


class Drafter(JsonObject):
    stage: Index
    pipeline_size: Literal[1]
    tp: Count
    layer_ids: tuple[Index, ...]
    numbering: Numbering
    kind: Literal["head", "model", "lookup"]
    target_layers: tuple[Index, Index]


class TapProducers(JsonObject):
    tap: Index
    producers: tuple[Index, ...]


class Link(JsonObject):
    link: tuple[Index, Index]
    taps: Index
    bytes: Bytes
    messages: Index
    note: str | Absent = ABSENT


class Routing(JsonObject):
    chain: tuple[Link, ...]
    direct: tuple[Link, ...]


class SampledRows(JsonObject):
    """Which rows the sampled-token broadcast to earlier stages covers (pipeline.sample_discount).

    Every stage evaluates `rule` on its own copy of the scheduler's counts, which are identical
    on all stages; `computed` may be inflated by the previous round's drafts (rolled back only
    when the entry is consumed, pp rounds later). `discount_tokens` is what the length-cap test
    subtracts: the most drafts a round verifies (`bound`, num_steps for a chain: at least any
    inflation) or null (`drafts`: this round's
    draft count, which misses the previous round's inflation). specplan/verify/mixed.py proves
    the rule for every interleaving of chunk sizes and draft counts.
    """

    discount: Literal["bound", "drafts"]
    discount_tokens: Index | None
    rule: str


class GateCollective(JsonObject):
    """One collective a gate's value selects: whether it runs, or its shape."""

    op: str
    family: str
    what: str


class Gate(JsonObject):
    """A decision that selects which collectives a rank issues next (DESIGN.md §2): the group
    it is agreed over (`family`; null: each rank decides alone) and what agrees it
    (`agreed_by`), beside the collectives it selects, each with its family."""

    name: str
    phase: Literal["startup", "prefill", "decode"]
    input: Literal["rank_local", "batch_local", "global"]
    function: str
    family: str | None
    agreed_by: str
    site: str | None  # the site whose converge carries the agreement (off: no agreement)
    selects: tuple[GateCollective, ...]
    doc: str


class DpAgreement(JsonObject):
    family: str
    op: Literal["all_gather", "all_reduce_sum"]
    ints_per_rank: Count
    bytes: Bytes
    forwards_per_round: Mapping[str, Index]
    idle_ranks: str
    why: str


class MoeRows(JsonObject):
    a2a: A2a
    dispatch_family: str
    row_split: bool
    gather_family: str | None
    rows_per_rank: Index
    gather_bytes_per_layer: Bytes


OpName = Literal["forward", "broadcast", "all_reduce_min", "all_gather", "all_reduce_sum",
                 "all_to_all", "ring", "send", "recv"]


class Op(JsonObject):
    """One step of a rank class's round: a forward, a stage handoff, or a collective.

    Which keys an op has depends on what it is (`kind`): a converge boundary names its
    `boundary`, a relay its `site`, a handoff its `peer_member`, the DP token-count exchange
    and the MoE collectives their `what`. `bytes` is null where the sender's width is known
    only at run time (payload_width: dynamic).
    """

    op: OpName
    compute: str | Absent = ABSENT
    family: str | Absent = ABSENT
    count: Index | Absent = ABSENT
    rows: Index | Absent = ABSENT
    peer_member: Index | Absent = ABSENT
    bytes: Bytes | None | Absent = ABSENT
    boundary: Index | Absent = ABSENT
    site: str | Absent = ABSENT
    source_member: Index | Absent = ABSENT
    sites: tuple[str, ...] | Absent = ABSENT
    recv_from: Index | None | Absent = ABSENT
    send_to: Index | None | Absent = ABSENT
    what: str | Absent = ABSENT
    per_layer: bool | Absent = ABSENT

    @property
    def kind(self) -> str:
        """boundary | relay | dp | forward | p2p | moe."""
        if self.boundary is not ABSENT:
            return "boundary"
        if self.site is not ABSENT:
            return "relay"
        if self.what == "dp_token_counts":
            return "dp"
        if self.op == "forward":
            return "forward"
        return "p2p" if self.op in ("send", "recv") else "moe"


class Program(JsonObject):
    startup: Ops
    prefill: Ops
    decode: Ops

    def round(self, kind: str) -> Ops:
        return getattr(self, kind)


class RankClass(JsonObject):
    id: Index
    rule: Mapping[str, Index]
    program: Program
    idle_program: Program | Absent = ABSENT

    @property
    def stage(self) -> int:
        return self.rule.get("pp", 0)


__all__ = ["A2a", "Bytes", "Count", "DpAgreement", "Drafter", "Field", "Gate", "GateCollective", "Index", "Layout", "Link", "MoeRows",
           "Numbering", "Op", "OpName", "Ops", "Program", "RankClass", "Routing", "SampledRows", "TapProducers",
           "Unfused"]
