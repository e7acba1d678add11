"""The Mesh: rank <-> coordinates, every group family, replicas and their sources, stages.

Pure rank arithmetic, no torch. What differs between engines (the layout as named axes,
the PP split) the engine's convention object says: engines.build_mesh(spec) makes the Mesh.

Worked example, 8 ranks: sglang tp=4, pp=2 (rank = 4 * pp_rank + tp_rank):
    families tp [0,1,2,3] [4,5,6,7]; pp [0,4] [1,5] [2,6] [3,7]
    rank 6: tp=2, pp=1; replica [0..7] with source 4 (first rank of the last stage)
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from specplan.mesh.family import Family
from specplan.mesh.pipeline import Stage


@dataclass(frozen=True)
class Replica:
    index: int
    ranks: tuple[int, ...]
    source: int  # global rank that hands its decisions to the others


@dataclass(frozen=True)
class Mesh:
    engine: str
    world_size: int
    num_worlds: int
    widths: dict[str, int]  # axis -> size, as the spec sets it
    derived: dict[str, int]  # widths the engine derives (attn_tp, moe_tp, ...)
    families: tuple[Family, ...]  # in the one order every rank creates them
    stages: tuple[Stage, ...]
    gpus_per_node: int
    extra_coords: dict[str, list[int]]  # axes with no family of their own (sglang attn_dp)

    def family(self, name: str) -> Family:
        for fam in self.families:
            if fam.name == name:
                return fam
        raise KeyError(f"no group family {name!r}; families: {', '.join(f.name for f in self.families)}")

    @cached_property
    def coords(self) -> dict[str, list[int]]:
        """axis -> the group rank of every global rank in that axis' family."""
        out: dict[str, list[int]] = {}
        for fam in self.families:
            if fam.name == "replica":
                continue
            out[fam.name] = fam.group_ranks()
        return out | self.extra_coords

    @cached_property
    def replicas(self) -> tuple[Replica, ...]:
        pp = self.widths["pp"]
        out = []
        for i, ranks in enumerate(self.family("replica").groups()):
            per_stage = len(ranks) // pp
            out.append(Replica(i, tuple(ranks), ranks[(pp - 1) * per_stage]))
        return tuple(out)

    @cached_property
    def replica_of(self) -> list[int]:
        """Replica index of every rank."""
        out = [0] * self.world_size
        for rep in self.replicas:
            for rank in rep.ranks:
                out[rank] = rep.index
        return out

    def node(self, rank: int) -> tuple[int, int]:
        """(node, local_rank) of a rank of the first world."""
        return divmod(rank, self.gpus_per_node)

    def stage_of(self, rank: int) -> int:
        return self.coords["pp"][rank]
