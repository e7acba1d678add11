"""Families as digits: the proofs' reading of rank numbers, never a list of ranks.

A family is a strided view of the ranks (mesh/family.py). Its groups partition ranks
0 .. world-1 exactly when its dims, sorted by stride (size-1 dims dropped), form a mixed
radix: the smallest stride is 1 and each next stride is the previous stride times its size,
up to the world. (Necessary too: rank 1 needs a stride of 1; the first number the dims
below cannot make needs a dim of exactly that stride, or it is never made or made twice.)

Several families over one world share `Digits` when every stride and stride x size of every
dim divides the next larger one: the common refinement of their mixed radices. A rank is
then a tuple of digit values, rank = sum(value_i * stride_i), and each family is a set of
digits its groups run along (group digits) and a set they are enumerated along. Rank
properties become digit facts: two ranks share an F group iff they agree on F's other
digits; a rank's stage is the value of the pp family's group digits.

Worked example, 8 ranks: sglang tp=4, pp=2 (rank = 4 * pp_rank + tp_rank), families
tp (2, 4)/(4, 1) and pp (4, 2)/(1, 4): breakpoints 1, 4, 8, so digit 0 (stride 1, size 4)
and digit 1 (stride 4, size 2); tp groups along digit 0, pp along digit 1. Rank 6 is
(2, 1): tp member 2, stage 1. pp member 1 of rank 2's group is rank 2 with digit 1 := 1: 6.
"""

from __future__ import annotations

from specplan.mesh.family import Family


def partitions(fam: Family, world: int) -> bool:
    """Whether the family's groups cover every rank 0 .. world-1 exactly once."""
    if len(fam.shape) != len(fam.strides) or not 0 < fam.group_ndim <= len(fam.shape):
        return False
    expected = 1
    for stride, size in sorted((st, n) for n, st in zip(fam.shape, fam.strides) if n > 1):
        if stride != expected:
            return False
        expected *= size
    return expected == world


class Digits:
    """The common mixed radix of families that partition one world (see the module doc)."""

    def __init__(self, families: dict[str, Family], world: int, bounds: list[int]):
        self.world = world
        self.families = families
        self.strides = bounds[:-1]
        self.sizes = [b // a for a, b in zip(bounds, bounds[1:])]
        self._at = {b: i for i, b in enumerate(bounds)}
        self.group_digits = {name: self._dims(f, f.group_ndim) for name, f in families.items()}

    @classmethod
    def of(cls, families: dict[str, Family], world: int) -> Digits | None:
        """The shared digits, or None when a family is no partition or the radices do not nest."""
        if not all(partitions(f, world) for f in families.values()):
            return None
        bounds = {1, world}
        for f in families.values():
            for n, st in zip(f.shape, f.strides):
                if n > 1:
                    bounds |= {st, st * n}
        ordered = sorted(bounds)
        if any(b % a for a, b in zip(ordered, ordered[1:])):
            return None
        return cls(families, world, ordered)

    def _dims(self, fam: Family, ndim: int) -> list[list[int]]:
        """Per group dim (group-rank order, slowest first), its digits, slowest first."""
        split = len(fam.shape) - ndim
        out = []
        for n, st in zip(fam.shape[split:], fam.strides[split:]):
            low, high = (self._at[st], self._at[st * n]) if n > 1 else (0, 0)
            out.append(list(range(high - 1, low - 1, -1)))
        return out

    def group(self, family: str) -> set[int]:
        """The digits along which `family`'s groups run."""
        return {d for dim in self.group_digits[family] for d in dim}

    def member(self, family: str, group_rank: int) -> dict[int, int]:
        """The values of the group digits of the member at `group_rank` of any group."""
        fam = self.families[family]
        split = len(fam.shape) - fam.group_ndim
        out: dict[int, int] = {}
        dims = list(zip(fam.shape[split:], self.group_digits[family]))
        for n, digits in reversed(dims):
            group_rank, value = divmod(group_rank, n)
            for d in reversed(digits):
                value, out[d] = divmod(value, self.sizes[d])
        return out

    def value(self, digits: list[list[int]], values: dict[int, int]) -> int:
        """The number that `values` of `digits` spell (dims slowest first, as in `_dims`)."""
        n = 0
        for dim in digits:
            for d in dim:
                n = n * self.sizes[d] + values[d]
        return n

    def stage_values(self, pp: int) -> list[dict[int, int]]:
        """The pp digits' values of each stage 0 .. pp-1."""
        return [self.member("pp", s) for s in range(pp)]
