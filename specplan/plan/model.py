"""The plan as frozen typed objects: one class per object of plan.json, fields in key order.

docs/plan-format.md says what each key means; docs/plan.schema.json states the same shapes
as a JSON Schema (a test holds the two together). A field defaulting to `ABSENT` is a key the
file may leave out. Wire layouts are the planner's: every guarded collective (a converge
boundary or a pipeline relay) carries its packed `Layout`, its header id and the bytes it
sends, and `Plan.buffer_bytes` gives each family's one buffer size; readers never compute one.
The leaf objects the passes draft as they are (Field, Layout, Unfused, Drafter, TapProducers,
Link, Routing, SampledRows, DpAgreement, MoeRows, and the rank classes' programs: RankClass,
Program, Op) are defined in specplan/ir/records.py and
named here as the plan's own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from specplan.engines.choices import BehaviourMode, Numbering, PayloadWidth, RelayMode, SyncGroup
from specplan.ir.codec import ABSENT, Absent, JsonObject
from specplan.ir.nodes import Round
from specplan.ir.records import (  # the plan's own, re-exported
    A2a as A2a, Bytes as Bytes, Count as Count, DpAgreement as DpAgreement,
    Drafter as Drafter, Field as Field, Gate as Gate, GateCollective as GateCollective,
    ConvergeOp as ConvergeOp, Index as Index, Layout as Layout, Link as Link, MoeRows as MoeRows,
    Op as Op, OpName as OpName, Ops as Ops, Program as Program,
    RankClass as RankClass, Routing as Routing, SampledRows as SampledRows, SiteReaders as SiteReaders,
    TapProducers as TapProducers, Unfused as Unfused)
from specplan.methods.base import Dtype, Nature, SiteKind
from specplan.schema.model import MethodName


class Rule(JsonObject):
    """A strided view of the global ranks (docs/plan-format.md, *Regenerating groups*)."""

    shape: tuple[Count, ...]
    strides: tuple[Index, ...]
    group_ndim: Count
    alias: str | Absent = ABSENT


class FamilyRule(JsonObject):
    name: str
    rule: Rule
    group_size: Count
    num_groups: Count


class Decision(JsonObject):
    name: str
    symbols: tuple[str, ...]
    shape: tuple[Index, ...]
    dtype: Dtype
    nature: Nature
    bytes: Bytes


class Site(JsonObject):
    name: str
    round: Round
    phase: str
    kind: SiteKind
    decisions: tuple[Decision, ...]
    family: str
    source_member: Index
    readers: SiteReaders
    converge: bool
    reason: str
    trivial: bool
    boundary: Index | None
    line: Count | None


class Boundary(JsonObject):
    """One fused converge: one collective over one family, carrying one or more sites."""

    id: Index
    round: Round
    family: str
    source_member: Index
    op: ConvergeOp
    sites: tuple[str, ...]
    layout: Layout
    buffer_bytes: Bytes


class Stage(JsonObject):
    pp_rank: Index
    start_layer: Index
    end_layer: Count
    taps: tuple[Index, ...]


class Relay(JsonObject):
    """A last-stage site carried to the earlier stages over `pp`, as a guarded collective:
    `id` is its guard-header id, `layout` its packed payload, `buffer_bytes` what it sends
    (the pp family's one buffer)."""

    site: str
    round: Round
    mode: RelayMode
    family: Literal["pp"]
    source_member: Index
    bytes: Bytes
    width: PayloadWidth
    id: Index
    layout: Layout
    buffer_bytes: Bytes


class Relays(JsonObject):
    mode: RelayMode
    relay_drafts: bool
    payload_width: PayloadWidth
    sites: tuple[Relay, ...]
    sampled_rows: SampledRows | None


class Pipeline(JsonObject):
    stages: tuple[Stage, ...]
    drafter: Drafter | None
    taps: tuple[TapProducers, ...]
    tap_ids: Numbering
    aux_routing: Literal["chain", "direct", "dropped"]
    routing: Routing
    relay: Relays
    handoff_bytes: Bytes


class MoeShape(JsonObject):
    num_experts: Count
    top_k: Count
    a2a: A2a
    eplb: bool | Absent = ABSENT  # true: the expert-parallel load balancer moves experts


class Model(JsonObject):
    num_layers: Count
    hidden_size: Count
    vocab_size: Count
    dtype: Literal["bf16", "fp16", "fp8", "fp32"]
    moe: MoeShape | None


class Speculative(JsonObject):
    method: MethodName
    num_steps: Index
    topk: Count
    num_draft_tokens: Count
    sampling: Literal["greedy", "sampling", "mixed"]
    taps: tuple[Index, ...]
    max_batch: Count


class Sync(JsonObject):
    policy: Literal["safe", "all", "rng", "init", "off"]
    sites: Mapping[str, Literal["on", "off"]]


class RuntimeSettings(JsonObject):
    max_batch: Count
    timeout_s: float
    trace_dir: str | None
    probe_every: Index
    batch_identity: bool
    async_scheduling: bool | Absent = ABSENT  # round r's decisions are consumed in round r + 1


class Behaviour(JsonObject):
    mode: BehaviourMode
    group: SyncGroup
    relay: RelayMode
    rng_is_float: str | None
    lockstep_sites: tuple[str, ...]
    notes: tuple[str, ...]


class Source(JsonObject):
    """Where findings point in the YAML; outside the fingerprint (comments move lines)."""

    spec_file: str
    lines: Mapping[str, Count]
