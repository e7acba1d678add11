"""Gates: the decisions whose value selects which collectives a rank issues next (DESIGN.md §2).

A gate is a sibling of a site. A site converges a value every rank of a replica reads; a gate
is a choice (a CUDA-graph path, a capture, a DP padding mode, an idle rank's dummy forward, a
verify budget, a free-memory reading) after which a rank issues some collectives and not
others, or issues them with another shape. The rule (DESIGN.md §7 item 6): a gate must be
agreed over every rank of every collective it selects.

The format, for whoever adds an engine's rows (engines/<engine>/gates.py holds them, as a
tuple `GATES` of `GateRow`; the convention's `gates(spec, choices)` calls `resolve_gates`):

    GateRow(
        name="dspark_draft_graph_mem",      # snake_case, unique over the engine's rows
        phase="startup",                    # startup | prefill | decode: when it is taken
        input="rank_local",                 # rank_local: read from something outside the
                                            #   launch line (free memory, timing, an event
                                            #   query); batch_local: from the rank's own
                                            #   batch; global: from values already agreed
        function="dspark_worker_v2.py DSparkWorkerV2.init_cuda_graphs",  # the engine's code
        methods=("dspark",),                # speculative.method values; () = every method
        when=lambda spec: ...,              # the topology / options it is taken under
        agreed=lambda spec, choices: ("attn_tp", "how the engine agrees it"),
                                            # the family the engine agrees it over under
                                            # `behaviour: engine`, or None: each rank alone
        selects=lambda spec: (Selected("all_reduce", "tp", "what it is"), ...),
        carrier="dspark_mem",               # specplan's site that carries the value in its
                                            #   own plan ("{method}_accept" names the method's),
                                            #   or None (the DP token-count exchange carries it)
        doc="one sentence: what the choice is and what differs between its values")

Families are the mesh's names (tp, attn_tp, moe_ep, pp, replica, ...). `choices` is the
behaviour the spec resolves to (engines/choices.py Choices): `choices.engine_sites` says which
of the engine's own sites are on, for gates whose agreement rides a site. Nothing here
imports torch or a spec: a row reads the spec through engines/reads.py's `Spec`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from specplan.engines.choices import Choices
from specplan.engines.reads import Spec

Phase = Literal["startup", "prefill", "decode"]
Input = Literal["rank_local", "batch_local", "global"]


@dataclass(frozen=True)
class Selected:
    """One collective a gate's value selects (runs or not, or with another shape)."""

    op: str  # all_reduce | all_gather | broadcast | reduce_scatter | all_to_all | capture
    family: str
    what: str


@dataclass(frozen=True)
class GateUse:
    """A gate as it applies to one spec: its agreement under the spec's behaviour resolved
    (`family` None: each rank decides alone) and the collectives it selects."""

    name: str
    phase: Phase
    input: Input
    function: str
    family: str | None
    agreed_by: str
    selects: tuple[Selected, ...]
    carrier: str | None
    doc: str


# A row's agreement: (the family the engine agrees the gate over, or None: each rank alone; how).
Agreed = Callable[[Spec, Choices], tuple[str | None, str]]


@dataclass(frozen=True)
class GateRow:
    """One gate an engine's code takes (the format above)."""

    name: str
    phase: Phase
    input: Input
    function: str
    methods: tuple[str, ...]
    when: Callable[[Spec], bool]
    agreed: Agreed
    selects: Callable[[Spec], tuple[Selected, ...]]
    doc: str
    carrier: str | None = None

    def applies(self, spec: Spec) -> bool:
        method = spec.speculative.method
        return (not self.methods or method in self.methods) and self.when(spec)

    def use(self, spec: Spec, choices: Choices) -> GateUse:
        family, how = self.agreed(spec, choices)
        carrier = self.carrier.format(method=spec.speculative.method) if self.carrier else None
        return GateUse(self.name, self.phase, self.input, self.function, family, how,
                       self.selects(spec), carrier, self.doc)


def resolve_gates(rows: tuple[GateRow, ...], spec: Spec, choices: Choices) -> tuple[GateUse, ...]:
    """The gates of `rows` the spec's method and topology take, in declaration order."""
    return tuple(row.use(spec, choices) for row in rows if row.applies(spec))


__all__ = ["Agreed", "GateRow", "GateUse", "Input", "Phase", "Selected", "resolve_gates"]
