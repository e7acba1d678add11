"""The Plan: what `specplan compile` writes, `check` verifies and `runtime.bind` binds.

One frozen object, loaded from and dumped to plan.json (see load.py), with the lookups every
reader needs made once here: families as rules that regenerate their groups, sites and
boundaries by name or id, each rank's stage and replica, each stage's program. No torch.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from functools import cached_property
from typing import Any, Literal

from specplan.mesh.family import Family
from specplan.schema.model import Engine
from specplan.plan.codec import ABSENT, Absent, JsonObject, encode
from specplan.plan.model import (Behaviour, Boundary, Bytes, Count, DpAgreement, FamilyRule, Gate, Model,
                                 MoeRows, Pipeline, RankClass, Relay, RuntimeSettings, Site,
                                 Source, Speculative, Sync, Unfused)

SCHEMA_VERSION = 3


def canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def fingerprint(plan: Mapping[str, Any]) -> str:
    """sha256 of the plan's JSON without its fingerprint and without YAML line numbers: a
    comment that moves `sync.policy` down a line changes where findings point, not the plan."""
    body = {k: v for k, v in plan.items() if k not in ("fingerprint", "source")}
    body["sites"] = [{k: v for k, v in site.items() if k != "line"} for site in plan["sites"]]
    return hashlib.sha256(canonical(body)).hexdigest()


class Plan(JsonObject):
    schema_version: Literal[3]
    name: str
    engine: Engine
    spec_sha256: str
    fingerprint: str
    world_size: Count
    num_worlds: Count
    device: Literal["cuda", "rocm", "npu", "cpu"]
    backend: Literal["nccl", "hccl", "zbal", "gloo"]
    widths: Mapping[str, Count]
    derived: Mapping[str, Count]
    model: Model
    speculative: Speculative
    sync: Sync
    families: tuple[FamilyRule, ...]
    sites: tuple[Site, ...]
    gates: tuple[Gate, ...]
    boundaries: tuple[Boundary, ...]
    buffer_bytes: Mapping[str, Bytes]
    unfused: tuple[Unfused, ...]
    pipeline: Pipeline
    dp_agreement: DpAgreement | None
    moe: MoeRows | None
    rank_classes: tuple[RankClass, ...]
    in_flight: Count
    passes: tuple[str, ...]
    runtime: RuntimeSettings
    behaviour: Behaviour
    source: Source
    # Why the spec's engine refuses to launch this topology (Convention.launch_refusal, the
    # refusal `export` prints); absent when it launches. `check` reports it as an ERROR.
    launch_refusal: str | Absent = ABSENT
    # The engine release the plan was made for when the spec names one older than the newest
    # (spec.engine_version); absent: the newest release specplan models. The plugins compare
    # it with the release they run in (plugins/release.py).
    engine_version: str | Absent = ABSENT

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = encode(self)
        return out

    def dumps(self) -> str:
        """plan.json's text: one key per line (indent 1), keys in build order, a final newline."""
        return json.dumps(self.to_json(), indent=1) + "\n"

    # -- lookups -------------------------------------------------------------------------
    @cached_property
    def family(self) -> dict[str, Family]:
        """Every family by name, as the rule that regenerates its groups, in creation order."""
        return {f.name: Family(f.name, f.rule.shape, f.rule.strides, f.rule.group_ndim,
                               f.rule.alias or None) for f in self.families}

    @cached_property
    def site(self) -> dict[str, Site]:
        return {s.name: s for s in self.sites}

    @property
    def relays(self) -> tuple[Relay, ...]:
        return self.pipeline.relay.sites

    @cached_property
    def relay(self) -> dict[str, Relay]:
        return {r.site: r for r in self.relays}

    @property
    def pp(self) -> int:
        return self.widths["pp"]

    @property
    def max_batch(self) -> int:
        return self.runtime.max_batch

    @cached_property
    def symbols(self) -> dict[str, int]:
        """The values of the symbols decision shapes are written in, at capacity."""
        sp, m = self.speculative, self.model
        return {"bs": self.max_batch, "num_steps": sp.num_steps, "topk": sp.topk,
                "num_draft_tokens": sp.num_draft_tokens, "vocab": m.vocab_size, "hidden": m.hidden_size}

    def rank_class(self, stage: int) -> RankClass:
        return next(c for c in self.rank_classes if c.stage == stage)

    def groups(self, family: str) -> list[list[int]]:
        return self._groups[family]

    @cached_property
    def _groups(self) -> dict[str, list[list[int]]]:
        return _LazyGroups(self.family)

    @cached_property
    def stages(self) -> list[int]:
        """The pipeline stage of every global rank (its group rank in the pp family)."""
        out = [0] * self.world_size
        for group in self.groups("pp"):
            for stage, rank in enumerate(group):
                out[rank] = stage
        return out

    @cached_property
    def replicas(self) -> list[int]:
        """The replica index of every global rank."""
        out = [0] * self.world_size
        for i, group in enumerate(self.groups("replica")):
            for rank in group:
                out[rank] = i
        return out

    def group_of(self, family: str, rank: int) -> list[int]:
        """The ranks of `rank`'s own group in `family`, in group-rank order."""
        fam = self.family[family]
        index, _ = fam.locate(rank)
        return [fam.rank_at(index, r) for r in range(fam.group_size)]

    def line(self, *keys: str) -> int | None:
        """The YAML line of the first key written; else the behaviour or method line."""
        for key in (*keys, "behaviour", "speculative.method"):
            if key in self.source.lines:
                return self.source.lines[key]
        return None


class _LazyGroups(dict[str, list[list[int]]]):
    def __init__(self, families: dict[str, Family]):
        super().__init__()
        self._families = families

    def __missing__(self, name: str) -> list[list[int]]:
        groups = self._families[name].groups()
        self[name] = groups
        return groups
