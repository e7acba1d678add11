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

import math
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
        return math.prod(self.shape[len(self.shape) - self.group_ndim:])

    @property
    def num_groups(self) -> int:
        return math.prod(self.shape[: len(self.shape) - self.group_ndim])

    def groups(self) -> list[list[int]]:
        """Every group of the family, in creation order, members in group-rank order."""
        split = len(self.shape) - self.group_ndim
        members = _offsets(self.shape[split:], self.strides[split:])
        bases = _offsets(self.shape[:split], self.strides[:split])
        n = len(members)
        if members == list(range(n)):  # contiguous blocks: build each in C
            return [list(range(base, base + n)) for base in bases]
        return [[base + m for m in members] for base in bases]

    def bases(self) -> list[int]:
        """The first member of every group, in creation order."""
        split = len(self.shape) - self.group_ndim
        return _offsets(self.shape[:split], self.strides[:split])

    def offsets(self) -> list[int]:
        """Each member's distance from its group's first member, in group-rank order."""
        split = len(self.shape) - self.group_ndim
        return _offsets(self.shape[split:], self.strides[split:])

    def group_ranks(self) -> list[int]:
        """The group rank of every global rank 0 .. size-1 (the family covers them all).

        Each dim's index is (rank // stride) % size, a run-length pattern repeated over the
        ranks, so the column is built with list repetition rather than a per-rank loop.
        """
        world = math.prod(self.shape)
        split = len(self.shape) - self.group_ndim
        column = [0] * world
        weight = 1
        for size, stride in reversed(list(zip(self.shape[split:], self.strides[split:]))):
            if size > 1:
                run = [v * weight for v in range(size) for _ in range(stride)]
                column = list(map(int.__add__, column, run * (world // len(run))))
            weight *= size
        return column

    def locate(self, rank: int) -> tuple[int, int]:
        """(group index, group rank) of a global rank, by the family rule alone."""
        index = [(rank // stride) % size for size, stride in zip(self.shape, self.strides)]
        split = len(self.shape) - self.group_ndim
        return _flat(index[:split], self.shape[:split]), _flat(index[split:], self.shape[split:])

    def rank_at(self, group: int, group_rank: int) -> int:
        """The global rank at `group_rank` of group number `group`: the inverse of locate."""
        split = len(self.shape) - self.group_ndim
        index = _unflat(group, self.shape[:split]) + _unflat(group_rank, self.shape[split:])
        return sum(i * s for i, s in zip(index, self.strides))

    def rule(self) -> dict:
        """The JSON form a plan stores; `groups()` regenerates the rank lists from it."""
        out = {"shape": list(self.shape), "strides": list(self.strides), "group_ndim": self.group_ndim}
        if self.alias:
            out["alias"] = self.alias
        return out


def _offsets(shape: tuple[int, ...], strides: tuple[int, ...]) -> list[int]:
    """Row-major offsets of a strided view, built one dim at a time."""
    out = [0]
    for size, stride in zip(shape, strides):
        steps = [i * stride for i in range(size)]
        out = [o + step for o in out for step in steps]
    return out


def _flat(index: list[int], shape: tuple[int, ...]) -> int:
    n = 0
    for i, size in zip(index, shape):
        n = n * size + i
    return n


def _unflat(n: int, shape: tuple[int, ...]) -> list[int]:
    out = []
    for size in reversed(shape):
        n, i = divmod(n, size)
        out.append(i)
    return out[::-1]


def from_rule(name: str, rule: dict) -> Family:
    return Family(name, tuple(rule["shape"]), tuple(rule["strides"]), rule["group_ndim"], rule.get("alias"))
