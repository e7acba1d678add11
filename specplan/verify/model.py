"""The verifier's view of a plan: families as rank lists, each rank's stage and replica.

Built from plan.json alone (no spec, no torch), so `specplan check PLAN.json` works.
"""

from __future__ import annotations

from functools import cached_property

from specplan.mesh.family import Family, from_rule


class PlanView:
    def __init__(self, plan: dict):
        self.plan = plan
        self.world = plan["world_size"]
        self.families: dict[str, Family] = {f["name"]: from_rule(f["name"], f["rule"])
                                            for f in plan["families"]}
        self.pp = plan["widths"]["pp"]
        self.last = self.pp - 1
        self.sites = {s["name"]: s for s in plan["sites"]}
        self.lines = plan.get("source", {}).get("lines", {})

    def groups(self, family: str) -> list[list[int]]:
        return self._groups[family]

    @cached_property
    def _groups(self) -> dict[str, list[list[int]]]:
        return _LazyGroups(self.families)

    @cached_property
    def stage_of(self) -> list[int]:
        out = [0] * self.world
        for group in self.groups("pp"):
            for stage, rank in enumerate(group):
                out[rank] = stage
        return out

    @cached_property
    def replica_of(self) -> list[int]:
        out = [0] * self.world
        for i, group in enumerate(self.groups("replica")):
            for rank in group:
                out[rank] = i
        return out

    def spans_replicas(self, family: str) -> bool:
        rep = self.replica_of
        return any(len({rep[r] for r in g}) > 1 for g in self.groups(family))

    def line(self, *keys: str) -> int | None:
        """The YAML line of the first key written; else the behaviour or method line."""
        for key in (*keys, "behaviour", "speculative.method"):
            if key in self.lines:
                return self.lines[key]
        return None


class _LazyGroups(dict):
    def __init__(self, families: dict[str, Family]):
        super().__init__()
        self._families = families

    def __missing__(self, name: str) -> list[list[int]]:
        groups = self._families[name].groups()
        self[name] = groups
        return groups
