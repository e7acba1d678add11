"""Group families from named axes: one reading of the ranks as an ordered list of axes.

An `AxisLayout` lists (axis, size) slowest first, so the last axis varies fastest (row-major, as
torch DeviceMesh; Megatron's order strings run the other way). An axis' stride is the
product of the sizes after it. `family(name, group, over)` makes the family whose groups
run along the `group` axes (members in that order) and are enumerated along the `over`
axes (default: the other axes, in layout order); every axis is named exactly once. An entry
may be a tuple of axes adjacent in the layout: they act as one axis (the product of their
sizes, the stride of the fastest). An engine reads one block of ranks several ways (SGLang's
TP block as attention and as MoE), each its own AxisLayout over the same world.

Worked example, 8 ranks: sglang tp=4, pp=2, AxisLayout(("pp", 2), ("tp", 4)), strides pp 4, tp 1:
    family("tp", group=("tp",))  shape (2, 4) strides (4, 1): [0,1,2,3] [4,5,6,7]
    family("pp", group=("pp",))  shape (4, 2) strides (1, 4): [0,4] [1,5] [2,6] [3,7]
    coords("pp") = [0, 0, 0, 0, 1, 1, 1, 1]
"""

from __future__ import annotations

from specplan.mesh.family import Family

Entry = str | tuple[str, ...]


class AxisLayout:
    """Named axes over ranks 0 .. world-1, slowest first."""

    def __init__(self, *axes: tuple[str, int]) -> None:
        names = [name for name, _ in axes]
        if len(set(names)) != len(names):
            raise ValueError(f"axis names repeat in {names}")
        self.axes = tuple(axes)
        self.sizes = dict(axes)
        self.strides: dict[str, int] = {}
        stride = 1
        for name, size in reversed(axes):
            self.strides[name] = stride
            stride *= size
        self.world = stride

    def family(self, name: str, group: tuple[Entry, ...], over: tuple[Entry, ...] | None = None,
               alias: str | None = None) -> Family:
        """The family whose groups run along `group`, enumerated along `over`."""
        if over is None:
            used = {a for e in group for a in _names(e)}
            over = tuple(a for a, _ in self.axes if a not in used)
        named = [a for e in (*over, *group) for a in _names(e)]
        if sorted(named) != sorted(self.sizes):
            raise ValueError(f"family {name} names axes {named}; the layout has {list(self.sizes)}")
        dims = [self._dim(e) for e in (*over, *group)]
        return Family(name, tuple(s for s, _ in dims), tuple(st for _, st in dims), len(group), alias)

    def coords(self, axis: str) -> list[int]:
        """The coordinate along `axis` of every rank 0 .. world-1."""
        size, stride = self.sizes[axis], self.strides[axis]
        run = [i for i in range(size) for _ in range(stride)]
        return run * (self.world // len(run))

    def _dim(self, entry: Entry) -> tuple[int, int]:
        """(size, stride) of one axis, or of adjacent axes acting as one."""
        names = _names(entry)
        order = [a for a, _ in self.axes]
        start = order.index(names[0])
        if order[start:start + len(names)] != list(names):
            raise ValueError(f"axes {names} are not adjacent in the layout {order}")
        size = 1
        for a in names:
            size *= self.sizes[a]
        return size, self.strides[names[-1]]


def _names(entry: Entry) -> tuple[str, ...]:
    return (entry,) if isinstance(entry, str) else entry
