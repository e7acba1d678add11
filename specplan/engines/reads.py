"""What an engine reads of the layers above it, as typed protocols.

engines/ sits below schema/, ir/, plan/ and deploy/ (docs/architecture.md, Layers): the loader
asks every spec its engine's rules, the planner asks the engine for its collectives, a
deployment asks each engine's KV handoff rules. So a convention cannot import the types it
reads; these protocols name exactly what it reads of them, read-only, and mypy checks the real
types against them wherever one is passed in:

- `Spec` (and its parts `Topology`, `Model`, `Moe`, `Speculative`, `Sync`, `Disaggregation`):
  specplan.schema.model's frozen pydantic models;
- `MoeRows`: the plan's MoE rows (specplan.ir.records.MoeRows, plan.json `moe_rows`);
- `Geometry`: one instance of a deployment as a KV handoff sees it
  (specplan.deploy.geometry.Geometry).

A field the engines start reading is added here first; nothing here is constructed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol


class Topology(Protocol):
    """schema/model.py `Topology`: how the ranks are laid out."""

    @property
    def tp(self) -> int: ...
    @property
    def pp(self) -> int: ...
    @property
    def dp(self) -> int: ...
    @property
    def dp_attention(self) -> bool: ...
    @property
    def cp(self) -> int: ...
    @property
    def dcp(self) -> int: ...
    @property
    def ep(self) -> int: ...
    @property
    def moe_dp(self) -> int: ...
    @property
    def nodes(self) -> int: ...
    @property
    def dp_lm_head(self) -> bool: ...
    @property
    def device(self) -> str: ...
    @property
    def model_fields_set(self) -> set[str]: ...  # the keys the YAML wrote


class Moe(Protocol):
    """schema/model.py `Moe`: a mixture-of-experts model."""

    @property
    def num_experts(self) -> int: ...
    @property
    def a2a(self) -> str: ...
    @property
    def eplb(self) -> bool: ...


class Model(Protocol):
    """schema/model.py `ModelCfg`: the target model's shape."""

    @property
    def num_layers(self) -> int: ...
    @property
    def pp_partition(self) -> Sequence[int] | None: ...
    @property
    def moe(self) -> Moe | None: ...


class Speculative(Protocol):
    """schema/model.py `Speculative`: the method and its widths."""

    @property
    def method(self) -> str: ...
    @property
    def num_steps(self) -> int: ...
    @property
    def topk(self) -> int: ...
    @property
    def num_draft_tokens(self) -> int | None: ...
    @property
    def sampling(self) -> str: ...
    @property
    def aux_layers(self) -> Sequence[int] | None: ...
    @property
    def draft_tp(self) -> int | None: ...
    @property
    def verify_width(self) -> int: ...
    def taps(self, num_layers: int) -> tuple[int, ...]: ...


class Sync(Protocol):
    """schema/model.py `Sync`: which decisions converge."""

    @property
    def policy(self) -> str: ...
    @property
    def model_fields_set(self) -> set[str]: ...


class Disaggregation(Protocol):
    """schema/model.py `Disaggregation`: the instance's PD role."""

    @property
    def role(self) -> str: ...


class Spec(Protocol):
    """schema/model.py `Spec`, as far as an engine reads it."""

    @property
    def engine(self) -> str: ...
    @property
    def engine_version(self) -> str | None: ...
    @property
    def topology(self) -> Topology: ...
    @property
    def model(self) -> Model: ...
    @property
    def speculative(self) -> Speculative: ...
    @property
    def sync(self) -> Sync: ...
    @property
    def disaggregation(self) -> Disaggregation | None: ...
    @property
    def engine_args(self) -> Sequence[str] | None: ...


class MoeRows(Protocol):
    """ir/records.py `MoeRows`: where the plan moves a MoE layer's rows."""

    @property
    def a2a(self) -> str: ...
    @property
    def dispatch_family(self) -> str: ...
    @property
    def row_split(self) -> bool: ...
    @property
    def gather_family(self) -> str | None: ...


class Geometry(Protocol):
    """deploy/geometry.py `Geometry`: one instance of a deployment, as its KV handoff reads it."""

    @property
    def role(self) -> str: ...
    @property
    def attn_tp(self) -> int: ...
    @property
    def cp(self) -> int: ...
    @property
    def dcp(self) -> int: ...
    @property
    def pp(self) -> int: ...
    @property
    def num_kv_heads(self) -> int: ...
    @property
    def attention(self) -> str: ...
    @property
    def is_mla(self) -> bool: ...
