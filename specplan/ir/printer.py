"""A deterministic text form of the round graph: one line per node, in dependency order."""

from __future__ import annotations

from specplan.ir.graph import StageGraph


def render(graph: StageGraph) -> str:
    lines = []
    for node in graph.topological():
        inputs = []
        for pred in graph.predecessors(node):
            carries = graph.edge(pred, node)["carries"]
            inputs.append(f"{pred.id}" + (f"[{','.join(carries)}]" if carries else ""))
        attrs = " ".join(f"{k}={_fmt(v)}" for k, v in node.attrs if k != "order")
        line = f"{node.id:<48} {attrs}".rstrip()
        if inputs:
            line += "  <- " + " ".join(inputs)
        lines.append(line)
    return "\n".join(lines) + "\n"


def _fmt(value: object) -> str:
    if isinstance(value, (tuple, list)):
        return "(" + ",".join(map(str, value)) + ")"
    return str(value)
