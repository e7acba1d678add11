"""Findings: what the verifier reports, with where to look and how to fix it."""

from __future__ import annotations

from dataclasses import Field, asdict, dataclass
from typing import TYPE_CHECKING, Any, ClassVar

SEVERITIES = ("ERROR", "WARN", "INFO")


class Record:
    """A frozen dataclass as JSON reads it: its fields in order, tuples as lists."""

    if TYPE_CHECKING:  # every subclass is a dataclass
        __dataclass_fields__: ClassVar[dict[str, Field[Any]]]

    def to_dict(self) -> dict:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


@dataclass(frozen=True, kw_only=True)  # every call names what it knows; the rest is unknown
class Finding(Record):
    severity: str  # ERROR: will desync, hang or corrupt; WARN: correct only if rank-local values agree
    site: str | None = None
    decision: str | None = None
    group: str | None = None  # the family whose groups are involved
    ranks: tuple[int, ...] = ()  # example ranks involved (a few, not every rank of a large world)
    round: str | None = None  # startup | prefill | decode
    line: int | None = None  # the YAML line to look at
    message: str
    fix: str
    gate: str | None = None  # the gate (plan.json `gates`) a gate finding is about

    def to_dict(self) -> dict:
        out = super().to_dict()
        if self.gate is None:
            out.pop("gate")  # findings about sites read as they always have
        return out


def sort_findings(findings: list[Finding]) -> list[Finding]:
    order = {s: i for i, s in enumerate(SEVERITIES)}
    return sorted(findings, key=lambda f: (order[f.severity], f.round or "", f.site or f.gate or "", f.message))


HARDWARE_NOTES = {
    "rocm": "known to break on ROCm (fused all-reduce is not bit-deterministic: sglang#31071, #34238)",
    "npu": "unproven on NPU (HCCL reductions; SGLang's NPU greedy path has no broadcast)",
    "fp8": "FP8 GEMMs are not bit-identical across ranks",
}
