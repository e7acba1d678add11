"""IR node types: the five stage kinds of a round, one node per stage instance per PP stage.

    Decision -> Converge -> Materialize -> Compute -> Decision -> Converge -> Commit

A node is frozen; a pass that refines one builds a new node with `evolve`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

from specplan.methods.base import Dtype

Kind = Literal["decision", "converge", "materialize", "compute", "commit"]
KINDS: tuple[Kind, ...] = ("decision", "converge", "materialize", "compute", "commit")
Round = Literal["startup", "prefill", "decode"]
ROUNDS: tuple[Round, ...] = ("startup", "prefill", "decode")  # the one round order
# Guard-header ids of relays (passes/pipeline_stages.py numbers them from here), apart from the
# boundary ids below it, so the runtime tells a relay's header from a boundary's.
RELAY_ID_BASE = 1 << 16
# The guard header every guarded buffer starts with, (name, dtype, byte offset) in order: the
# planner lays it out (passes/pin_widths.py), plan.json states it, the runtime writes and
# checks it (runtime/guard.py). The one table.
GUARD_HEADER: tuple[tuple[str, Dtype, int], ...] = (
    ("boundary", "int32", 0), ("live_rows", "int32", 4), ("round", "int64", 8),
    ("fingerprint", "int64", 16), ("batch", "int64", 24))
GUARD_HEADER_BYTES = 32


@dataclass(frozen=True)
class Node:
    kind: Kind
    name: str  # decision, site, phase or compute name
    round: Round
    phase: str
    stage: int  # the PP stage this instance runs on
    line: int | None = None  # the spec line it came from
    attrs: tuple[tuple[str, Any], ...] = ()

    @property
    def id(self) -> str:
        return f"{self.kind}:{self.round}.{self.name}@{self.stage}"

    def attr(self, key: str, default: Any = None) -> Any:
        for k, v in self.attrs:
            if k == key:
                return v
        return default

    def evolve(self, **attrs: Any) -> "Node":
        """A copy with `attrs` set (added or replaced)."""
        merged = dict(self.attrs)
        merged.update(attrs)
        return replace(self, attrs=tuple(sorted(merged.items())))


def node_id(kind: Kind, round: str, name: str, stage: int) -> str:
    return f"{kind}:{round}.{name}@{stage}"
