"""A bound plan's read-only view: families as rank lists, boundaries with typed fields.

Torch-free, so the preflight, the lowering and the trace tools share it. A field's capacity
shape is the plan's (`bs` = max_batch); `live_shape` re-evaluates its symbols with `bs` set to
the round's live rows, which is a prefix of the capacity field because `bs` always leads.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from specplan.mesh.family import Family, from_rule
from specplan.methods.base import eval_dim

HEADER_FIELDS = ("boundary", "live_rows", "round", "fingerprint")
RELAY_ID_BASE = 1 << 16  # header ids of relays, apart from boundary ids


@dataclass(frozen=True)
class Field:
    site: str
    decision: str
    dtype: str
    shape: tuple[int, ...]
    symbols: tuple[str, ...]
    offset: int
    bytes: int


@dataclass(frozen=True)
class Boundary:
    """One fused converge (or a pp relay): one collective over one family."""

    id: int
    round: str
    family: str
    op: str  # broadcast | all_reduce_min | column | ring
    source_member: int
    sites: tuple[str, ...]
    fields: tuple[Field, ...]
    header_bytes: int
    buffer_bytes: int

    @property
    def decisions(self) -> tuple[str, ...]:
        return tuple(f.decision for f in self.fields)

    @property
    def label(self) -> str:
        return "+".join(self.sites)


def load_plan(plan) -> dict:
    """`plan` is a path to plan.json or its loaded content."""
    if isinstance(plan, dict):
        return plan
    return json.loads(Path(plan).read_text())


def fingerprint_int64(hexdigest: str) -> int:
    """The header's fingerprint: the plan fingerprint's first 64 bits, as a signed int64."""
    value = int(hexdigest[:16], 16)
    return value - (1 << 64) if value >= 1 << 63 else value


class PlanView:
    def __init__(self, plan):
        self.raw = load_plan(plan)
        p = self.raw
        self.name: str = p["name"]
        self.fingerprint: str = p["fingerprint"]
        self.fingerprint64 = fingerprint_int64(self.fingerprint)
        self.world_size: int = p["world_size"]
        self.backend: str = p["backend"]
        self.device: str = p["device"]
        rt = p.get("runtime") or {}
        self.timeout_s: float = float(rt.get("timeout_s", 300))
        self.trace_dir: str | None = rt.get("trace_dir")
        self.probe_every: int = int(rt.get("probe_every", 0))
        self.max_batch: int = int(rt.get("max_batch", p["speculative"]["max_batch"]))
        self.families: dict[str, Family] = {f["name"]: from_rule(f["name"], f["rule"]) for f in p["families"]}
        self.sites: dict[str, dict] = {s["name"]: s for s in p["sites"]}
        self.boundaries = [self._boundary(b) for b in p["boundaries"]]
        self.relays = [self._relay(i, r) for i, r in enumerate(p["pipeline"]["relay"]["sites"])]
        self.symbols = self._symbols()

    def _symbols(self) -> dict[str, int]:
        sp, m = self.raw["speculative"], self.raw["model"]
        return {"bs": self.max_batch, "num_steps": sp["num_steps"], "topk": sp["topk"],
                "num_draft_tokens": sp["num_draft_tokens"], "vocab": m["vocab_size"],
                "hidden": m["hidden_size"]}

    def _boundary(self, b: dict) -> Boundary:
        lay = b["layout"]
        fields = tuple(Field(f["site"], f["decision"], f["dtype"], tuple(f["shape"]),
                             tuple(f.get("symbols", ())), f["offset"], f["bytes"]) for f in lay["fields"])
        return Boundary(b["id"], b["round"], b["family"], b["op"], b["source_member"],
                        tuple(b["sites"]), fields, lay["header_bytes"], b["buffer_bytes"])

    def _relay(self, i: int, r: dict) -> Boundary:
        """A relay gets a guarded layout like a boundary: header, then its decisions 8-aligned."""
        site = self.sites[r["site"]]
        offset, fields = 32, []
        for d in site["decisions"]:
            fields.append(Field(r["site"], d["name"], d["dtype"], tuple(d["shape"]),
                                tuple(d["symbols"]), offset, d["bytes"]))
            offset += -(-d["bytes"] // 8) * 8
        return Boundary(RELAY_ID_BASE + i, site["round"], r["family"], r["mode"], r["source_member"],
                        (r["site"],), tuple(fields), 32, offset)

    def family_buffer_bytes(self) -> dict[str, int]:
        """Per family, the one buffer all its guarded collectives share (the largest)."""
        sizes: dict[str, int] = {}
        for b in self.boundaries + self.relays:
            sizes[b.family] = max(sizes.get(b.family, 0), b.buffer_bytes)
        return sizes

    def boundary_of(self, target) -> Boundary:
        """A boundary by id, or by the name of a site it carries."""
        if isinstance(target, int):
            return self.boundaries[target]
        site = self.sites.get(target)
        if site is None:
            raise KeyError(f"plan {self.name} has no site {target!r}; sites: {sorted(self.sites)}")
        if site["boundary"] is None:
            raise KeyError(f"site {target!r} has no converge boundary")
        return self.boundaries[site["boundary"]]

    def relay_of(self, site: str) -> Boundary | None:
        return next((r for r in self.relays if r.sites == (site,)), None)

    def live_shape(self, f: Field, live_rows: int) -> tuple[int, ...]:
        if not f.symbols:
            return f.shape
        symbols = dict(self.symbols, bs=live_rows)
        return tuple(eval_dim(s, symbols) for s in f.symbols)

    def decisions(self) -> list[tuple[str, str]]:
        """(site, decision) for every decision the plan names, converged or not, in plan order."""
        return [(s["name"], d["name"]) for s in self.raw["sites"] for d in s["decisions"]]

    def stage_of(self, rank: int) -> int:
        """The pipeline stage of a global rank (its group rank in the pp family)."""
        return self.families["pp"].locate(rank)[1]

    def program(self, stage: int, round_: str) -> list[tuple[str, object]]:
        """The guarded collectives of a stage's round, in schedule order: ("boundary", id),
        ("relay", site) or ("dp", dp_agreement op)."""
        cls = next(c for c in self.raw["rank_classes"] if c["rule"].get("pp", 0) == stage)
        out: list[tuple[str, object]] = []
        for op in cls["program"].get(round_, []):
            if "boundary" in op:
                out.append(("boundary", op["boundary"]))
            elif "site" in op and op.get("family") == "pp":
                out.append(("relay", op["site"]))
            elif op.get("what") == "dp_token_counts":
                out.append(("dp", op))
        return out

    def group_of(self, family: str, rank: int) -> list[int]:
        fam = self.families[family]
        index, _ = fam.locate(rank)
        return [fam.rank_at(index, r) for r in range(fam.group_size)]
