"""The Mesh: rank <-> coordinates, every group family, replicas and their sources, stages.

Pure rank arithmetic, no torch. Engine conventions live in `sglang.py` and `vllm.py` and
are chosen in one place, `CONVENTIONS`.

Worked example, 8 ranks: sglang tp=4, pp=2 (rank = 4 * pp_rank + tp_rank):
    families tp [0,1,2,3] [4,5,6,7]; pp [0,4] [1,5] [2,6] [3,7]
    rank 6: tp=2, pp=1; replica [0..7] with source 4 (first rank of the last stage)
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from specplan.mesh import sglang, vllm
from specplan.mesh.family import Family
from specplan.mesh.pipeline import Stage, build_stages
from specplan.schema.model import Spec

CONVENTIONS = {"sglang": sglang, "vllm": vllm}


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
        if self.engine == "sglang":
            # attn_dp has no family of its own: it is the replica's index inside the TP block
            block = self.derived["attn_tp"] * self.derived["attn_cp"]
            per_block = [i for i in range(self.derived["attn_dp"]) for _ in range(block)]
            out["attn_dp"] = per_block * (self.world_size // len(per_block))
        return out

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


def build_mesh(spec: Spec) -> Mesh:
    t = spec.topology
    conv = CONVENTIONS[spec.engine]
    if spec.engine == "vllm":
        fams = conv.families(t, is_moe=spec.model.moe is not None)
    else:
        fams = conv.families(t)
    world, worlds = conv.world_size(t), conv.num_worlds(t)
    parts = spec.model.pp_partition or conv.split_layers(spec.model.num_layers, t.pp)
    stages = build_stages(list(parts), spec.speculative.taps(spec.model.num_layers))
    widths = {k: getattr(t, k) for k in ("tp", "pp", "dp", "cp", "dcp", "ep", "moe_dp")}
    if spec.engine == "vllm":
        del widths["moe_dp"]
    return Mesh(spec.engine, world, worlds, widths, conv.derived(t), fams, stages,
                world * worlds // t.nodes)
