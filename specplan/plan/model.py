"""The plan as frozen typed objects: one class per object of plan.json, fields in key order.

docs/plan-format.md says what each key means; docs/plan.schema.json states the same shapes
as a JSON Schema (a test holds the two together). A field defaulting to `ABSENT` is a key the
file may leave out. Wire layouts are the planner's: every guarded collective (a converge
boundary or a pipeline relay) carries its packed `Layout`, its header id and the bytes it
sends, and `Plan.buffer_bytes` gives each family's one buffer size; readers never compute one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Literal

from specplan.ir.nodes import Round
from specplan.methods.base import Dtype
from specplan.plan.codec import ABSENT, JsonObject, Min

Count = Annotated[int, Min(1)]
Index = Annotated[int, Min(0)]
Bytes = Annotated[int, Min(0)]
Ops = tuple["Op", ...]


@dataclass(frozen=True)
class Rule(JsonObject):
    """A strided view of the global ranks (docs/plan-format.md, *Regenerating groups*)."""

    shape: tuple[Count, ...]
    strides: tuple[Index, ...]
    group_ndim: Count
    alias: str = ABSENT


@dataclass(frozen=True)
class FamilyRule(JsonObject):
    name: str
    rule: Rule
    group_size: Count
    num_groups: Count


@dataclass(frozen=True)
class Decision(JsonObject):
    name: str
    symbols: tuple[str, ...]
    shape: tuple[Index, ...]
    dtype: Dtype
    nature: Literal["deterministic", "float", "rng", "host"]
    bytes: Bytes


@dataclass(frozen=True)
class Site(JsonObject):
    name: str
    round: Round
    phase: str
    kind: Literal["broadcast", "min"]
    decisions: tuple[Decision, ...]
    family: str
    source_member: Index
    readers: Literal["all_stages", "last_stage"]
    converge: bool
    reason: str
    trivial: bool
    boundary: Index | None
    line: Count | None


@dataclass(frozen=True)
class Field(JsonObject):
    """One decision's place in a packed buffer, sized for capacity rows."""

    site: str
    decision: str
    dtype: Dtype
    shape: tuple[Index, ...]
    symbols: tuple[str, ...]
    offset: Index
    bytes: Bytes


@dataclass(frozen=True)
class Layout(JsonObject):
    """A packed buffer: the guard header (guarded collectives), then 8-aligned fields."""

    header: tuple[tuple[str, Dtype, Index], ...]
    header_bytes: Bytes
    capacity_rows: Count
    fields: tuple[Field, ...]
    bytes: Bytes


@dataclass(frozen=True)
class Boundary(JsonObject):
    """One fused converge: one collective over one family, carrying one or more sites."""

    id: Index
    round: Round
    family: str
    source_member: Index
    op: Literal["broadcast", "all_reduce_min"]
    sites: tuple[str, ...]
    layout: Layout
    buffer_bytes: Bytes


@dataclass(frozen=True)
class Unfused(JsonObject):
    after: str
    before: str
    family: str
    dependency: tuple[str, ...]


@dataclass(frozen=True)
class Stage(JsonObject):
    pp_rank: Index
    start_layer: Index
    end_layer: Count
    taps: tuple[Index, ...]


@dataclass(frozen=True)
class Drafter(JsonObject):
    stage: Index
    pipeline_size: Literal[1]
    tp: Count
    layer_ids: tuple[Index, ...]
    numbering: Literal["global", "stage_local"]
    kind: Literal["head", "model", "lookup"]
    target_layers: tuple[Index, Index]


@dataclass(frozen=True)
class TapProducers(JsonObject):
    tap: Index
    producers: tuple[Index, ...]


@dataclass(frozen=True)
class Link(JsonObject):
    link: tuple[Index, Index]
    taps: Index
    bytes: Bytes
    messages: Index
    note: str = ABSENT


@dataclass(frozen=True)
class Routing(JsonObject):
    chain: tuple[Link, ...]
    direct: tuple[Link, ...]


@dataclass(frozen=True)
class Relay(JsonObject):
    """A last-stage site carried to the earlier stages over `pp`, as a guarded collective:
    `id` is its guard-header id, `layout` its packed payload, `buffer_bytes` what it sends
    (the pp family's one buffer)."""

    site: str
    round: Round
    mode: Literal["broadcast", "column", "ring"]
    family: Literal["pp"]
    source_member: Index
    bytes: Bytes
    width: Literal["pinned", "agreed", "dynamic"]
    id: Index
    layout: Layout
    buffer_bytes: Bytes


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class Relays(JsonObject):
    mode: Literal["broadcast", "column", "ring"]
    relay_drafts: bool
    payload_width: Literal["pinned", "agreed", "dynamic"]
    sites: tuple[Relay, ...]
    sampled_rows: SampledRows | None


@dataclass(frozen=True)
class Pipeline(JsonObject):
    stages: tuple[Stage, ...]
    drafter: Drafter | None
    taps: tuple[TapProducers, ...]
    tap_ids: Literal["global", "stage_local"]
    aux_routing: Literal["chain", "direct", "dropped"]
    routing: Routing
    relay: Relays
    handoff_bytes: Bytes


@dataclass(frozen=True)
class DpAgreement(JsonObject):
    family: str
    op: Literal["all_gather", "all_reduce_sum"]
    ints_per_rank: Count
    bytes: Bytes
    forwards_per_round: Mapping[str, Index]
    idle_ranks: str
    why: str


@dataclass(frozen=True)
class MoeRows(JsonObject):
    a2a: Literal["none", "deepep"]
    dispatch_family: str
    row_split: bool
    gather_family: str | None
    rows_per_rank: Index
    gather_bytes_per_layer: Bytes


OpName = Literal["forward", "broadcast", "all_reduce_min", "all_gather", "all_reduce_sum",
                 "all_to_all", "ring", "send", "recv"]


@dataclass(frozen=True)
class Op(JsonObject):
    """One step of a rank class's round: a forward, a stage handoff, or a collective.

    Which keys an op has depends on what it is (`kind`): a converge boundary names its
    `boundary`, a relay its `site`, a handoff its `peer_member`, the DP token-count exchange
    and the MoE collectives their `what`. `bytes` is null where the sender's width is known
    only at run time (payload_width: dynamic).
    """

    op: OpName
    compute: str = ABSENT
    family: str = ABSENT
    count: Index = ABSENT
    rows: Index = ABSENT
    peer_member: Index = ABSENT
    bytes: Bytes | None = ABSENT
    boundary: Index = ABSENT
    site: str = ABSENT
    source_member: Index = ABSENT
    sites: tuple[str, ...] = ABSENT
    recv_from: Index | None = ABSENT
    send_to: Index | None = ABSENT
    what: str = ABSENT
    per_layer: bool = ABSENT

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


@dataclass(frozen=True)
class Program(JsonObject):
    startup: Ops
    prefill: Ops
    decode: Ops

    def round(self, kind: str) -> Ops:
        return getattr(self, kind)


@dataclass(frozen=True)
class RankClass(JsonObject):
    id: Index
    rule: Mapping[str, Index]
    program: Program
    idle_program: Program = ABSENT

    @property
    def stage(self) -> int:
        return self.rule.get("pp", 0)


@dataclass(frozen=True)
class MoeShape(JsonObject):
    num_experts: Count
    top_k: Count
    a2a: Literal["none", "deepep"]
    eplb: bool = ABSENT  # true: the expert-parallel load balancer moves experts


@dataclass(frozen=True)
class Model(JsonObject):
    num_layers: Count
    hidden_size: Count
    vocab_size: Count
    dtype: Literal["bf16", "fp16", "fp8", "fp32"]
    moe: MoeShape | None


@dataclass(frozen=True)
class Speculative(JsonObject):
    method: Literal["none", "eagle", "eagle3", "mtp", "standalone", "ngram", "dflash", "dspark"]
    num_steps: Index
    topk: Count
    num_draft_tokens: Count
    sampling: Literal["greedy", "sampling", "mixed"]
    taps: tuple[Index, ...]
    max_batch: Count


@dataclass(frozen=True)
class Sync(JsonObject):
    policy: Literal["safe", "all", "rng", "init", "off"]
    sites: Mapping[str, Literal["on", "off"]]


@dataclass(frozen=True)
class RuntimeSettings(JsonObject):
    max_batch: Count
    timeout_s: float
    trace_dir: str | None
    probe_every: Index
    batch_identity: bool
    async_scheduling: bool = ABSENT  # round r's decisions are consumed in round r + 1


@dataclass(frozen=True)
class Behaviour(JsonObject):
    mode: Literal["specplan", "engine"]
    group: Literal["replica", "attn_tp", "tp"]
    relay: Literal["broadcast", "column", "ring"]
    rng_is_float: str | None
    lockstep_sites: tuple[str, ...]
    notes: tuple[str, ...]


@dataclass(frozen=True)
class Source(JsonObject):
    """Where findings point in the YAML; outside the fingerprint (comments move lines)."""

    spec_file: str
    lines: Mapping[str, Count]
