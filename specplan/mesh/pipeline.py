"""Pipeline facts: which layers each stage holds and which stage produces each tap.

How many layers each stage gets is the engine's rule (Convention.split_layers).

Layer ranges are half-open [start, end). Tap L is the residual stream entering layer L
(tap 0 is the embedding output); stage r owns tap L when start_r < L <= end_r, and tap 0
belongs to stage 0, so a tap on a stage boundary is produced once, upstream.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Stage:
    pp_rank: int
    start_layer: int
    end_layer: int
    taps: tuple[int, ...]


def tap_owner(tap: int, bounds: list[tuple[int, int]]) -> int:
    """The stage that produces `tap`, given each stage's [start, end)."""
    if tap == 0:
        return 0
    for r, (start, end) in enumerate(bounds):
        if start < tap <= end:
            return r
    raise ValueError(f"tap {tap} is outside layers 0..{bounds[-1][1]}")


def build_stages(parts: list[int], taps: tuple[int, ...]) -> tuple[Stage, ...]:
    bounds, start = [], 0
    for n in parts:
        bounds.append((start, start + n))
        start += n
    owned: dict[int, list[int]] = {r: [] for r in range(len(parts))}
    for tap in sorted(taps):
        owned[tap_owner(tap, bounds)].append(tap)
    return tuple(Stage(r, s, e, tuple(owned[r])) for r, (s, e) in enumerate(bounds))


def draft_layer_ids(stages: tuple[Stage, ...], count: int, numbering: str) -> list[int]:
    """The layer ids the drafter's `count` layers take on the last stage.

    global: after the target's total layers (93 layers: 93, 94, ...). stage_local: after the
    last stage's own layer count, as engines once numbered them (93 layers on two vLLM stages,
    [0, 47) and [47, 93): 46, 47, ..., which collide with the stage's own target layers).
    """
    last = stages[-1]
    first = last.end_layer if numbering == "global" else last.end_layer - last.start_layer
    return [first + i for i in range(count)]
