"""Pass contracts: what each pass requires of the IR before it runs and ensures after.

A pass module declares `REQUIRES` and `ENSURES` as tuples of condition paths into the graph's
sections (torch.fx's PassBase `requires` / `ensures`, as data): `families` means the section
exists; `sites[].family` that every entry of the `sites` section (a list, or a dict's values)
has the key `family`; `pipeline.relay.sites[].layout` walks dicts and lists the same way;
`graph` that the round graph has nodes. The pipeline checks both sides around every pass, so
a pass run out of order, or one that forgets what it promised, fails at once with the pass
and the path named (an IRError: a bug in specplan, never the user's input).
"""

from __future__ import annotations

from specplan.ir import IRError, StageGraph


def check(graph: StageGraph, conditions: tuple[str, ...], *, pass_name: str, side: str) -> None:
    """Raise IRError naming every condition the graph does not meet."""
    missing = [c for c in conditions if not holds(graph, c)]
    if missing:
        raise IRError(f"pass {pass_name!r} {side} {', '.join(missing)}, which the IR lacks "
                      f"({'a pass before it did not run' if side == 'requires' else 'it did not provide them'})")


def holds(graph: StageGraph, condition: str) -> bool:
    if condition == "graph":
        return bool(graph.nodes())
    head, *rest = condition.split(".")
    if head.removesuffix("[]") not in graph.sections:
        return False
    return _holds(graph.sections, [head, *rest])


def _holds(node, keys: list[str]) -> bool:
    if not keys:
        return True
    key, *rest = keys
    each = key.endswith("[]")
    key = key.removesuffix("[]")
    if not isinstance(node, dict) or key not in node:
        return False
    value = node[key]
    if not each:
        # An optional section left None (no dp_agreement, no moe) has nothing more to check.
        return not rest or value is None or _holds(value, rest)
    items = value.values() if isinstance(value, dict) else value
    return all(_holds(item, rest) for item in items)
