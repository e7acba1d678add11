"""Pass build_round: the method's phases as a graph of stage instances.

Requires: a spec, its mesh and its method. Ensures: for every round (startup, prefill,
decode; an instance of a disaggregated deployment only its role's, see `planned_rounds`)
and phase, a compute node on each stage that runs it (chained stage to stage by the
pipeline handoff), a decision node on the stage that decides (the last; deterministic
decisions on every reader stage), a materialize node per reader stage fed straight from the
decisions, and a commit node per stage. No converge exists yet: every edge from a decision
on the last stage to another stage is, so far, an unconverged read.
"""

from __future__ import annotations

from specplan.ir import Node
from specplan.ir.nodes import Round
from specplan.methods.base import Decision, Phase
from specplan.passes.context import Planning
from specplan.passes.contracts import DRAFT, GRAPH
from specplan.schema import Spec

Last = dict[int, Node | None]  # the last node of each stage, which the next one follows

NAME = "build_round"
REQUIRES = ()
ENSURES = (GRAPH, DRAFT.pp)


def run(p: Planning) -> None:
    startup = tuple(d for d in p.method.decisions if d.phase == "startup" and p.included(d))
    if startup:
        _round(p, "startup", (Phase("startup", tuple(d.name for d in startup)),))
    for rnd in planned_rounds(p.spec):
        _round(p, rnd, p.method.prefill if rnd == "prefill" else p.method.decode)
    p.draft.pp = p.pp


def planned_rounds(spec: Spec) -> tuple[Round, ...]:
    """The request rounds an instance runs: a prefill instance (disaggregation.role: prefill)
    the prefill round only, its drafter's prefill-time draft extend included, then it hands
    the request and its KV over; a decode instance the decode rounds only, from the KV it
    receives; a plain spec both."""
    role = spec.disaggregation.role if spec.disaggregation else None
    only: dict[str | None, tuple[Round, ...]] = {"prefill": ("prefill",), "decode": ("decode",)}
    return only.get(role, ("prefill", "decode"))


def _round(p: Planning, rnd: Round, phases: tuple[Phase, ...]) -> None:
    last: Last = {s: None for s in range(p.pp)}
    for i, phase in enumerate(phases):
        order = (i + 1) * 10
        for s, node in _compute(p, rnd, phase, order).items():
            _chain(p, last, s, node)
        decisions = [p.method.decision(n) for n in phase.decisions]
        decisions = [d for d in decisions if p.included(d)]
        made = {d.name: _decide(p, rnd, phase, d, order, last) for d in decisions}
        if made:
            _materialize(p, rnd, phase, decisions, made, order, last)
        if phase.name == "commit" or i == len(phases) - 1:
            for s in range(p.pp):
                _chain(p, last, s, p.graph.add(Node("commit", f"commit_{phase.name}", rnd,
                                                    phase.name, s, attrs=(("order", order + 5),))))


def _chain(p: Planning, last: Last, stage: int, node: Node) -> None:
    if (prev := last[stage]) is not None:
        p.graph.connect(prev, node)
    last[stage] = node


def _compute(p: Planning, rnd: Round, phase: Phase, order: int) -> dict[int, Node]:
    if phase.compute is None:
        return {}
    stages = range(p.pp) if phase.stage == "all" else [p.last_stage]
    out = {}
    for s in stages:
        out[s] = p.graph.add(Node(
            "compute", phase.name, rnd, phase.name, s, line=p.line("speculative", "method"),
            attrs=(("compute", phase.compute), ("forwards", phase.forwards), ("order", order),
                   ("tokens_per_request", phase.tokens_per_request))))
        if s - 1 in out:
            p.graph.connect(out[s - 1], out[s], ("hidden_states",), kind="pp_handoff")
    return out


def _decide(p: Planning, rnd: Round, phase: Phase, d: Decision, order: int, last: Last) -> list[Node]:
    stages = _reader_stages(p, d) if d.nature == "deterministic" else [p.last_stage]
    nodes = []
    for s in stages:
        node = p.graph.add(Node(
            "decision", d.name, rnd, phase.name, s, line=p.line("speculative", "method"),
            attrs=(("dtype", d.dtype), ("nature", d.nature), ("order", order + 1),
                   ("readers", d.readers), ("shape", d.shape), ("site", d.site))))
        if (prev := last[s]) is not None:
            p.graph.connect(prev, node)
        nodes.append(node)
    return nodes


def _materialize(p: Planning, rnd: Round, phase: Phase, decisions: list[Decision],
                 made: dict[str, list[Node]], order: int, last: Last) -> None:
    for s in range(p.pp):
        readers = [d for d in decisions if s in _reader_stages(p, d)]
        if not readers:
            continue
        derives = tuple(dict.fromkeys(x for d in readers for x in d.derives))
        node = p.graph.add(Node("materialize", phase.name, rnd, phase.name, s,
                                attrs=(("derives", derives), ("order", order + 3),
                                       ("reads", tuple(d.name for d in readers)))))
        for d in readers:
            src = next(n for n in made[d.name] if n.stage in (s, p.last_stage))
            src = next((n for n in made[d.name] if n.stage == s), src)
            p.graph.connect(src, node, (d.name,))
        _chain(p, last, s, node)


def _reader_stages(p: Planning, d: Decision) -> list[int]:
    if d.readers == "all_stages":
        return list(range(p.pp))
    return [0] if d.readers == "first_stage" else [p.last_stage]
