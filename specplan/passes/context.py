"""What every pass works on: the spec, its mesh, its method, the symbol values, the graph and
the plan's draft (ir/draft.py) the passes fill."""

from __future__ import annotations

from dataclasses import dataclass, field

from specplan.schema.behaviour import resolve
from specplan.engines import Choices
from specplan.ir import Draft, StageGraph
from specplan.mesh import Mesh
from specplan.methods.base import DTYPE_BYTES, Decision, Method
from specplan.schema import Spec


@dataclass
class Planning:
    spec: Spec
    mesh: Mesh
    method: Method
    graph: StageGraph = field(default_factory=StageGraph)
    draft: Draft = field(default_factory=Draft)
    choices: Choices = field(init=False)

    def __post_init__(self) -> None:
        self.choices = resolve(self.spec, self.method)

    @property
    def pp(self) -> int:
        return self.spec.topology.pp

    @property
    def last_stage(self) -> int:
        return self.pp - 1

    @property
    def symbols(self) -> dict[str, int]:
        s, m = self.spec.speculative, self.spec.model
        return {"bs": self.spec.runtime.max_batch, "num_steps": s.num_steps, "topk": s.topk,
                "num_draft_tokens": s.verify_width, "vocab": m.vocab_size, "hidden": m.hidden_size}

    @property
    def act_bytes(self) -> int:
        """Bytes of one activation element (model.dtype)."""
        return DTYPE_BYTES[self.spec.model.dtype]

    def included(self, d: Decision) -> bool:
        """Whether this spec's rounds make decision `d` (its sampling path, chain vs tree)."""
        mode = self.spec.speculative.sampling
        if d.path != "any" and mode != "mixed" and d.path != mode:
            return False
        return not (getattr(d, "tree_only", False) and self.spec.speculative.topk == 1)

    def line(self, *path: str | int) -> int | None:
        return self.spec.line_of(*path)[1]
