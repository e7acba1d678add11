"""What the engine's conventions say about a plan as a whole (Convention.world_warning)."""

from __future__ import annotations

from specplan.engines import convention
from specplan.verify.findings import Finding


def check_engine(engine: str, world_size: int, num_worlds: int) -> list[Finding]:
    note = convention(engine).world_warning(world_size, num_worlds)
    if note is None:
        return []
    return [Finding(severity="WARN", message=note,
                    fix="set dp_attention for one world of tp ranks spanning nodes, or run "
                    "the replicas as separate servers")]
