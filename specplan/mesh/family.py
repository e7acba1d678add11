"""A group family as a rule: a strided view of the rank numbers, split into groups.

A family is `shape` + `strides` over global ranks; the last `group_ndim` dims form one
group, the leading dims enumerate the groups (row-major). Contiguous blocks, strided
columns and transposed layouts are all such views, so a plan stores the rule and never
the rank lists (DeviceMesh-style: groups are derived, never hand-listed).

Worked example, 8 ranks as sglang tp=4 x pp=2 (rank = pp_rank * 4 + tp_rank):
    tp = Family("tp", shape=(2, 4), strides=(4, 1), group_ndim=1)
         groups [0,1,2,3] [4,5,6,7]
    pp = Family("pp", shape=(4, 2), strides=(1, 4), group_ndim=1)
         groups [0,4] [1,5] [2,6] [3,7]
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass


@dataclass(frozen=True)
class Family:
    name: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    group_ndim: int
    alias: str | None = None  # the engine reuses this other family's communicators

    @property
    def group_size(self) -> int:
        return _prod(self.shape[len(self.shape) - self.group_ndim:])

    @property
    def num_groups(self) -> int:
        return _prod(self.shape[: len(self.shape) - self.group_ndim])

    def groups(self) -> list[list[int]]:
        """Every group of the family, in creation order, members in group-rank order."""
        split = len(self.shape) - self.group_ndim
        members = _offsets(self.shape[split:], self.strides[split:])
        return [[base + m for m in members] for base in _offsets(self.shape[:split], self.strides[:split])]

    def rule(self) -> dict:
        """The JSON form a plan stores; `groups()` regenerates the rank lists from it."""
        out = {"shape": list(self.shape), "strides": list(self.strides), "group_ndim": self.group_ndim}
        if self.alias:
            out["alias"] = self.alias
        return out


def _offsets(shape: tuple[int, ...], strides: tuple[int, ...]) -> list[int]:
    if not shape:
        return [0]
    return [sum(i * s for i, s in zip(idx, strides)) for idx in itertools.product(*map(range, shape))]


def _prod(xs) -> int:
    n = 1
    for x in xs:
        n *= x
    return n


def from_rule(name: str, rule: dict) -> Family:
    return Family(name, tuple(rule["shape"]), tuple(rule["strides"]), rule["group_ndim"], rule.get("alias"))
