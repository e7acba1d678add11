"""explain's per-rank listings, made on demand, and the JSON writer that streams them.

At 1,048,576 ranks the rows, groups and replicas of `explain --json` are 160 MB of text, so
they are written as they are made, a block of ranks at a time: memory is that of one block.
A listing reads like the list it stands for (len, index, slice, iteration) and makes an item
from the family rules alone, so `explain --rank R` costs the same at any world size.

Rows come in blocks of B ranks. B is chosen so that every axis (size n, stride st) of every
column is either constant inside a block (B divides st), or repeats within one block with
nothing carried in (st divides B, and st x n divides B or B divides st x n). Then each
column of block k is block 0's column plus one constant, sum((k*B // st) % n * weight).
Worked example, 8 ranks as tp=4 x pp=2 (rank = 4 * pp_rank + tp_rank) with B = 4: block 0's
tp column is [0,1,2,3] and its pp column [0,0,0,0]; block 1 adds 0 to tp and 1 to pp.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from specplan.mesh import Mesh
from specplan.mesh.digits import partitions
from specplan.mesh.family import Family, _offsets

if TYPE_CHECKING:
    from typing_extensions import TypeIs

BLOCK = 1 << 14  # ranks per block: big enough that Python's per-block cost is small, small in memory
Dim = tuple[int, int, int]  # (size, stride, weight) of one axis of a column


class Listing(Sequence):
    """A list of JSON items made on demand, written to JSON block by block."""

    def item(self, i: int):
        raise NotImplementedError

    def texts(self) -> Iterator[list[str]]:
        """The items' JSON texts, a block at a time."""
        raise NotImplementedError

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self.item(j) for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        return self.item(i)

    def write_json(self, write: Callable[[str], object]) -> None:
        write("[")
        first = True
        for block in self.texts():
            if block:
                write(("" if first else ",") + ",".join(block))
                first = False
        write("]")


class Groups(Listing):
    """The groups of a family in creation order (`Family.groups()`), one at a time."""

    def __init__(self, fam: Family):
        self.fam = fam
        self.split = len(fam.shape) - fam.group_ndim
        self._members: list[int] | None = None

    def __len__(self) -> int:
        return self.fam.num_groups

    @property
    def members(self) -> list[int]:
        if self._members is None:
            self._members = self.fam.offsets()
        return self._members

    def item(self, i: int) -> list[int]:
        base = self.fam.rank_at(i, 0)
        return [base + m for m in self.members]

    def group_of(self, rank: int) -> tuple[int, list[int]]:
        """(group rank, the group) of a rank, by the family rule alone."""
        index, group_rank = self.fam.locate(rank)
        return group_rank, self.item(index)

    def smallest(self, k: int) -> list[list[int]]:
        """The k groups with the smallest first members (the groups sorted, then cut)."""
        fam = self.fam
        if not partitions(fam, math.prod(fam.shape)):
            return sorted(self.fam.groups())[:k]
        # bases of a partition grow in row-major order of its outer axes, slowest first
        outer = sorted(zip(fam.shape[:self.split], fam.strides[:self.split]), key=lambda d: -d[1])
        out = []
        for i in range(min(k, len(self))):
            base, rest = 0, i
            for n, st in reversed(outer):
                rest, v = divmod(rest, n)
                base += v * st
            out.append([base + m for m in self.members])
        return out

    def bases(self) -> Iterator[list[int]]:
        """The groups' first members in creation order, about BLOCK ranks' worth at a time."""
        dims = list(zip(self.fam.shape[:self.split], self.fam.strides[:self.split]))
        per_block = max(1, BLOCK // max(1, len(self.members)))
        inner: list[tuple[int, int]] = []
        count = 1
        while dims and count * dims[-1][0] <= per_block:
            inner.insert(0, dims.pop())
            count *= inner[0][0]
        if dims:  # split the next axis so one block still holds many groups
            n, st = dims.pop()
            m = max(d for d in range(1, min(n, per_block // count) + 1) if n % d == 0)
            dims.append((n // m, st * m))
            inner.insert(0, (m, st))
        offsets = _offsets(tuple(n for n, _ in inner), tuple(st for _, st in inner))
        for index in itertools.product(*(range(n) for n, _ in dims)):
            start = sum(i * st for i, (_, st) in zip(index, dims))
            yield [start + o for o in offsets]

    def texts(self) -> Iterator[list[str]]:
        members = self.members
        seps = [","] * (len(members) - 1) + ["],["]
        for bases in self.bases():
            yield [_interleave([b + m for b in bases for m in members], seps, "[", "]")]


class Members(Listing):
    """The rank at one group rank of every group of a family, in creation order."""

    def __init__(self, fam: Family, member: int):
        self.groups, self.offset = Groups(fam), fam.rank_at(0, member)

    def __len__(self) -> int:
        return len(self.groups)

    def item(self, i: int) -> int:
        return self.groups.fam.rank_at(i, 0) + self.offset

    def texts(self) -> Iterator[list[str]]:
        for bases in self.groups.bases():
            yield [",".join(map(str, [b + self.offset for b in bases]))]


class Replicas(Listing):
    """explain's replicas: each replica group with its source (first rank of the last stage)."""

    def __init__(self, mesh: Mesh):
        self.groups = Groups(mesh.family("replica"))
        self.pp = mesh.widths["pp"]

    def __len__(self) -> int:
        return len(self.groups)

    def _source(self, ranks: list[int]) -> int:
        return ranks[(self.pp - 1) * (len(ranks) // self.pp)]

    def item(self, i: int) -> dict:
        ranks = self.groups.item(i)
        return {"index": i, "ranks": ranks, "source": self._source(ranks)}

    def texts(self) -> Iterator[list[str]]:
        members = self.groups.members
        i = 0
        for bases in self.groups.bases():
            block = []
            for b in bases:
                ranks = [b + m for m in members]
                block.append(f'{{"index":{i},"ranks":[{",".join(map(str, ranks))}],'
                             f'"source":{self._source(ranks)}}}')
                i += 1
            yield block


class Rows(Listing):
    """One row per rank (rank, node, local_rank, each family's group rank, replica)."""

    def __init__(self, mesh: Mesh):
        self.world, per_node = mesh.world_size, mesh.gpus_per_node
        columns: dict[str, list[Dim] | list[int]] = {
            "node": [(math.ceil(self.world / per_node), per_node, 1)], "local_rank": [(per_node, 1, 1)]}
        for fam in mesh.families:
            if fam.name != "replica":
                columns[fam.name] = _dims(fam, group=True)
        columns |= mesh.extra_coords  # axes with no family: their per-rank lists, as Mesh.coords
        columns["replica"] = _dims(mesh.family("replica"), group=False)
        self.columns = columns
        self.keys = ("rank", *columns)
        self.block = _block(self.world, [d for c in columns.values() if _is_rule(c) for d in c])

    def __len__(self) -> int:
        return self.world

    def item(self, r: int) -> dict[str, int]:
        row = {"rank": r}
        for key, col in self.columns.items():
            row[key] = sum((r // st) % n * w for n, st, w in col) if _is_rule(col) else col[r]
        return row

    def texts(self) -> Iterator[list[str]]:
        size = self.block
        first = {k: _pattern(c, size) for k, c in self.columns.items() if _is_rule(c)}
        seps = [json.dumps(k) + ":" for k in self.keys]
        seps = [f",{key}" for key in seps[1:]] + ["},{" + seps[0]]
        for start in range(0, self.world, size):
            cols: list[Sequence[int]] = [range(start, start + size)]
            for key, col in self.columns.items():
                if not _is_rule(col):
                    cols.append(col[start:start + size])
                    continue
                add = sum((start // st) % n * w for n, st, w in col)
                cols.append(list(map(int.__add__, first[key], itertools.repeat(add, size))) if add
                            else first[key])
            flat: list = [None] * (size * len(cols))
            for i, values in enumerate(cols):
                flat[i::len(cols)] = values
            yield [_interleave(flat, seps, "{" + seps[-1][3:], "}")]


def _interleave(values: list[int], seps: list[str], head: str, tail: str) -> str:
    """head v0 s0 v1 s1 ... v_last tail, the separators cycling through `seps` (one join,
    no per-value formatting in Python: 1M ranks are a few such joins)."""
    out: list = [None] * (2 * len(values))
    out[0::2] = map(str, values)
    out[1::2] = seps * (len(values) // len(seps))
    out[-1] = tail
    return head + "".join(out)


def _is_rule(col: list[Dim] | list[int]) -> TypeIs[list[Dim]]:
    """A column given by its (size, stride, weight) dims, not one value per rank."""
    return not col or isinstance(col[0], tuple)


def _dims(fam: Family, group: bool) -> list[Dim]:
    """The (size, stride, weight) of the axes that number a rank's group (group=False) or
    its place in its group (group=True)."""
    split = len(fam.shape) - fam.group_ndim
    dims = list(zip(fam.shape, fam.strides))
    dims = dims[split:] if group else dims[:split]
    out, weight = [], 1
    for n, st in reversed(dims):
        if n > 1:
            out.append((n, st, weight))
        weight *= n
    return out


def _block(world: int, dims: list[Dim]) -> int:
    """The largest divisor of the world up to BLOCK for which every axis is a block constant
    or repeats inside a block (see the module doc); 1 always qualifies."""
    def fits(b: int) -> bool:
        return all(st % b == 0 or b % st == 0 and (b % (st * n) == 0 or (st * n) % b == 0)
                   for n, st, _ in dims)

    return next(b for b in range(min(world, BLOCK), 0, -1) if world % b == 0 and fits(b))


def _pattern(col: list[Dim], size: int) -> list[int]:
    """The column over ranks 0 .. size-1, built by list repetition rather than per rank."""
    out = [0] * size
    for n, st, w in col:
        if st >= size:
            continue
        run = [v * w for v in range(min(n, size // st)) for _ in range(st)]
        out = list(map(int.__add__, out, run * (size // len(run))))
    return out


def write_json(obj, write: Callable[[str], object]) -> None:
    """`json.dumps(obj, separators=(",", ":"))` written piece by piece, listings block by block."""
    if isinstance(obj, Listing):
        obj.write_json(write)
    elif not _holds_listing(obj):
        write(json.dumps(obj, separators=(",", ":")))
    elif isinstance(obj, dict):
        write("{")
        for i, (key, value) in enumerate(obj.items()):
            write(("," if i else "") + json.dumps(key) + ":")
            write_json(value, write)
        write("}")
    else:
        write("[")
        for i, value in enumerate(obj):
            write("," if i else "")
            write_json(value, write)
        write("]")


def _holds_listing(obj) -> bool:
    if isinstance(obj, Listing):
        return True
    values = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, list) else ()
    return any(_holds_listing(v) for v in values)
