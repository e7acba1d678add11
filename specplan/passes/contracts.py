"""Pass contracts: what each pass requires of the IR before it runs and ensures after.

A pass module declares `REQUIRES` and `ENSURES` as tuples of conditions (torch.fx's PassBase
`requires` / `ensures`, as data). A condition is `GRAPH` (the round graph has nodes) or an
attribute of the plan's draft (specplan/ir/draft.py), written as attributes: `DRAFT.families`
means the draft's families are filled (not ABSENT); `DRAFT.sites.each.family` that every
entry of `sites` (a list, or a dict's values) has its `family` filled;
`DRAFT.pipeline.relay.sites.each.layout` walks the same way. Each step is checked against the
draft's type hints when the pass module is imported, so a condition naming no attribute fails
at once. The pipeline checks both sides around every pass, so a pass run out of order, or one
that forgets what it promised, fails at once with the pass and the attribute named (an
IRError: a bug in specplan, never the user's input), written as `sites[].family`.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Union

from specplan.ir import IRError
from specplan.ir.codec import Absent
from specplan.ir.draft import ABSENT, Draft
from specplan.passes.context import Planning


class Attr:
    """A typed path into the draft: `DRAFT.sites.each.family`; `each` steps into a list's
    items or a dict's values."""

    def __init__(self, tp: Any, names: tuple[str, ...] = ()) -> None:
        self._tp, self._names = tp, names

    def __getattr__(self, name: str) -> "Attr":
        if name.startswith("_"):
            raise AttributeError(name)
        tp = _strip_none(self._tp)
        if name == "each":
            args = typing.get_args(tp)
            assert args, f"{self}: `each` of {tp!r}, which holds no items"
            return Attr(args[-1], self._names + (name,))
        assert isinstance(tp, type) and dataclasses.is_dataclass(tp), f"{self}.{name}: {tp!r} has no attributes"
        hints = typing.get_type_hints(tp)
        if name not in hints:
            raise AttributeError(f"{tp.__name__} has no attribute {name!r} (attributes: {', '.join(hints)})")
        return Attr(hints[name], self._names + (name,))

    def holds(self, p: Planning) -> bool:
        return _holds(p.draft, self._names)

    def __str__(self) -> str:
        return ".".join(self._names).replace(".each", "[]")

    __repr__ = __str__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Attr) and other._names == self._names

    def __hash__(self) -> int:
        return hash(self._names)


class _Graph:
    """The condition that the round graph has nodes."""

    def holds(self, p: Planning) -> bool:
        return bool(p.graph.nodes())

    def __str__(self) -> str:
        return "graph"

    __repr__ = __str__


DRAFT = Attr(Draft)
GRAPH = _Graph()
Condition = Attr | _Graph


def check(p: Planning, conditions: tuple[Condition, ...], *, pass_name: str, side: str) -> None:
    """Raise IRError naming every condition the planning `p` (its draft, its graph) does not meet."""
    missing = [str(c) for c in conditions if not holds(p, c)]
    if missing:
        raise IRError(f"pass {pass_name!r} {side} {', '.join(missing)}, which the IR lacks "
                      f"({'a pass before it did not run' if side == 'requires' else 'it did not provide them'})")


def holds(p: Planning, condition: Condition) -> bool:
    return condition.holds(p)


def _holds(value: Any, names: tuple[str, ...]) -> bool:
    if not names:
        return True
    name, *rest = names
    if name == "each":
        items = value.values() if isinstance(value, dict) else value
        return all(_holds(item, tuple(rest)) for item in items)
    value = getattr(value, name)
    if value is ABSENT:
        return False
    # An optional fact left None (no dp_agreement, no moe) has nothing more to check.
    return value is None or _holds(value, tuple(rest))


def _strip_none(tp: Any) -> Any:
    if typing.get_origin(tp) in (Union, types.UnionType):
        rest = [a for a in typing.get_args(tp) if a is not type(None) and a is not Absent]
        return rest[0] if len(rest) == 1 else tp
    return tp
