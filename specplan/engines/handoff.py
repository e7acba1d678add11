"""What every engine's KV handoff rules share: the answers a strategy gives, and its questions.

One strategy object per (engine, connector) lives in each engine's package (<engine>/handoff.py).
It answers, for one decode rank (its attention-TP rank and PP stage): which prefill
attention-TP, CP and PP ranks it pulls from, how many responses it waits for, and how many
decode ranks the producer counts before it frees a block; plus the pairings the engine refuses
at start-up. The deployment layer (deploy/handoff.py) asks `convention(engine).handoff(connector)`.

engines/ sits below deploy/ (docs/architecture.md, Layers): a strategy reads each instance's
geometry (deploy/geometry.py `Geometry`: attn_tp, cp, dcp, pp, is_mla, num_kv_heads, ...)
through the protocol engines/reads.py `Geometry`.

Worked example, 8 ranks: SGLang prefill attn_tp 2 x pp 2 (4 ranks) -> decode attn_tp 4 (4):
    decode TP rank 3 pulls prefill TP rank 3 // (4 // 2) = 1 on stages [0, 1]: 2 responses;
    each prefill rank's blocks have 4 // 2 = 2 consumers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from specplan.engines.reads import Geometry


@dataclass(frozen=True)
class Axes:
    """The mesh coordinates an engine's connector calls dp, attention-TP and CP."""

    dp: str
    tp: str
    cp: str
    attn_tp: str  # the mesh.derived key (or topology width) of the attention-TP size


@dataclass(frozen=True)
class Pull:
    tp_ranks: tuple[int, ...]
    cp_ranks: tuple[int, ...]
    pp_ranks: tuple[int, ...]
    responses: int
    consumers: int  # decode ranks the producer counts before it frees a block


@dataclass(frozen=True)
class Refusal:
    kind: str
    message: str


def tp_ratio_ok(p: Geometry, d: Geometry) -> bool:
    return d.attn_tp % p.attn_tp == 0 or p.attn_tp % d.attn_tp == 0


def pp_sources(p: Geometry, d: Geometry, stage: int) -> tuple[tuple[int, ...], int]:
    """Stages pulled and the response factor: the same stage when the PP sizes match, else all."""
    if p.pp == d.pp:
        return (stage,), 1
    return tuple(range(p.pp)), p.pp


class Rules(Protocol):
    """One (engine, connector)'s handoff: where a decode rank's KV comes from, and what the
    engine refuses."""

    engine: str
    connector: str
    by_name: bool  # layers routed by name (else by pointer position from the stage's first layer)
    naming: str  # how the engine pairs KV entries, in words
    function: str  # the engine function these rules read, with its release

    def refusals(self, p: Geometry, d: Geometry) -> list[Refusal]: ...

    def pull(self, p: Geometry, d: Geometry, tp: int, stage: int) -> Pull: ...
