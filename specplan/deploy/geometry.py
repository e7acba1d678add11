"""One instance's KV geometry: its attention-TP, CP and PP coordinates, layers, heads, drafts.

Pure arithmetic over the spec and its mesh (no torch, no planner). Rank coordinates are read
from the mesh's families through the engine's `Axes`, so the rank math stays in mesh/.

Worked example, 8 ranks: a vLLM prefill tp=4, pp=2 of 8 layers (rank = 4 * pp + tp):
    rank 6 -> dp 0, attention-TP rank 2, CP rank 0, stage 1 holding layers [4, 8);
    with a one-layer EAGLE3 drafter on stage 1 the draft KV is layer 8 (global numbering).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from specplan.schema.behaviour import resolve
from specplan.engines import build_mesh, of
from specplan.engines.handoff import Axes
from specplan.mesh import Mesh
from specplan.mesh.pipeline import draft_layer_ids
from specplan.methods import get_method
from specplan.schema import Spec

DEFAULT_KV_HEADS = {"mla": 1}  # else 8


@dataclass(frozen=True)
class Geometry:
    role: str
    file: str
    spec: Spec
    mesh: Mesh
    axes: Axes

    @property
    def engine(self) -> str:
        return self.spec.engine

    @property
    def attn_tp(self) -> int:
        return self.mesh.derived.get(self.axes.attn_tp) or self.spec.topology.tp

    @property
    def cp(self) -> int:
        return self.spec.topology.cp

    @property
    def dcp(self) -> int:
        return self.spec.topology.dcp

    @property
    def pp(self) -> int:
        return self.spec.topology.pp

    @property
    def num_ranks(self) -> int:
        return self.mesh.world_size * self.mesh.num_worlds

    @cached_property
    def dp(self) -> int:
        return max(self.dp_of) + 1

    @cached_property
    def dp_of(self) -> list[int]:
        """DP index of every rank of every world (independent worlds are DP replicas)."""
        world = self.mesh.world_size
        if self.mesh.num_worlds > 1:
            return [r // world for r in range(self.num_ranks)]
        return list(self.mesh.coords.get(self.axes.dp) or [0] * world)

    @cached_property
    def tp_of(self) -> list[int]:
        return self._tile(self.mesh.coords[self.axes.tp])

    @cached_property
    def cp_of(self) -> list[int]:
        return self._tile(self.mesh.coords.get(self.axes.cp) or [0] * self.mesh.world_size)

    @cached_property
    def pp_of(self) -> list[int]:
        return self._tile(self.mesh.coords["pp"])

    def _tile(self, column: list[int]) -> list[int]:
        return list(column) * self.mesh.num_worlds

    @cached_property
    def stages(self) -> tuple[tuple[int, int], ...]:
        return tuple((s.start_layer, s.end_layer) for s in self.mesh.stages)

    @property
    def num_layers(self) -> int:
        return self.spec.model.num_layers

    @property
    def method(self) -> str:
        return self.spec.speculative.method

    @cached_property
    def choices(self):
        return resolve(self.spec, get_method(self.method))

    @cached_property
    def draft_layers(self) -> tuple[int, ...]:
        """The ids the last stage registers the drafter's KV under; () without draft KV."""
        if not get_method(self.method).draft_model:
            return ()
        count = self.spec.speculative.draft_num_layers or 1
        return tuple(draft_layer_ids(self.mesh.stages, count, self.choices.draft_layer_ids))

    @property
    def taps(self) -> tuple[int, ...]:
        return self.spec.speculative.taps(self.num_layers)

    @property
    def attention(self) -> str:
        return self.spec.model.attention or "gqa"

    @property
    def is_mla(self) -> bool:
        return self.attention == "mla"

    @property
    def num_kv_heads(self) -> int:
        return self.spec.model.num_kv_heads or DEFAULT_KV_HEADS.get(self.attention, 8)

    @property
    def kv_cache_dtype(self) -> str:
        dtype = self.spec.model.kv_cache_dtype or "auto"
        return self.spec.model.dtype if dtype == "auto" else dtype

    @property
    def page_size(self) -> int:
        return self.spec.model.page_size or of(self.spec).page_size

    def heads(self, tp_rank: int) -> tuple[int, int]:
        """(first global KV head, count) a rank of attention-TP rank `tp_rank` holds.

        MLA keeps one latent, whole on every rank; with more ranks than KV heads each head is
        replicated over attn_tp / num_kv_heads ranks (8 ranks, 2 heads: ranks 0-3 hold head 0).
        """
        if self.is_mla:
            return 0, 1
        k, tp = self.num_kv_heads, self.attn_tp
        return tp_rank * k // tp, max(1, k // tp)

    def line(self, *path: str) -> str:
        """`file:line` of a key of this instance's YAML (or the file alone)."""
        file, line = self.spec.line_of(*path)
        return f"{file}:{line}" if line else file


def geometry(role: str, spec: Spec) -> Geometry:
    """The instance's geometry, its coordinates read through its engine's `kv_axes`."""
    return Geometry(role, spec.line_of()[0], spec, build_mesh(spec), of(spec).kv_axes)
