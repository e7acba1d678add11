"""The round picture as Mermaid (flowchart) and Graphviz DOT (digraph) text.

Same nodes, labels, lanes and edges as the SVG (round.RoundPicture), for tools that lay
graphs out themselves (GitHub renders Mermaid; `dot -Tsvg` renders DOT).
"""

from __future__ import annotations

import re

from specplan.pictures.round import EDGE, FILL, RoundPicture

MERMAID_SHAPE = {"decision": ('{{"', '"}}'), "converge": ('(["', '"])'), "materialize": ('[/"', '/"]'),
                 "compute": ('["', '"]'), "commit": ('(["', '"])')}
MERMAID_ARROW = {"data": "-->", "relay": "-.->", "handoff": "==>", "tap": "-.->"}
DOT_SHAPE = {"decision": "hexagon", "converge": "box", "materialize": "parallelogram",
             "compute": "box", "commit": "ellipse"}


def _nid(node_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", node_id)


def _q(text: str) -> str:
    return text.replace('"', "'")


def _lanes(pic: RoundPicture, rnd: str):
    """(stage, its nodes) for every pipeline stage with nodes in round `rnd`."""
    for stage in range(pic.pp):
        nodes = pic.graph.nodes(round=rnd, stage=stage)
        if nodes:
            yield stage, nodes


def render_mermaid(pic: RoundPicture) -> str:
    out = ["flowchart LR", f"  %% round graph of {pic.plan.name}"]
    for rnd in pic.rounds:
        out.append(f'  subgraph {rnd}["{rnd} round"]')
        for stage, nodes in _lanes(pic, rnd):
            out.append(f'    subgraph {rnd}_s{stage}["stage {stage}"]')
            for n in nodes:
                left, right = MERMAID_SHAPE[n.kind]
                out.append(f"      {_nid(n.id)}{left}{_q('<br/>'.join(pic.labels[n.id]))}{right}:::{n.kind}")
            out.append("    end")
        out.append("  end")
    for e in pic.edges:
        arrow = MERMAID_ARROW[e.style]
        label = f'|"{_q(e.label)}"|' if e.label else ""
        out.append(f"  {_nid(e.src)} {arrow}{label} {_nid(e.dst)}")
    out += [f"  classDef {kind} fill:{fill},stroke:#333" for kind, fill in FILL.items()]
    return "\n".join(out) + "\n"


def render_dot(pic: RoundPicture) -> str:
    out = [f'digraph "{pic.plan.name}-round" {{', '  graph [rankdir=LR, fontname="Helvetica"];',
           '  node [fontname="Helvetica", fontsize=10, style=filled];', '  edge [fontsize=9];']
    for rnd in pic.rounds:
        out.append(f'  subgraph cluster_{rnd} {{ label="{rnd} round";')
        for stage, nodes in _lanes(pic, rnd):
            out.append(f'    subgraph cluster_{rnd}_s{stage} {{ label="stage {stage}";')
            for n in nodes:
                style = ', style="rounded,filled", penwidth=2' if n.kind == "converge" else ""
                label = "\\n".join(_q(s) for s in pic.labels[n.id])
                out.append(f'      {_nid(n.id)} [label="{label}", shape={DOT_SHAPE[n.kind]}, '
                           f'fillcolor="{FILL[n.kind]}"{style}];')
            out.append("    }")
        out.append("  }")
    for e in pic.edges:
        attrs = [f'color="{EDGE[e.style]}"']
        if e.style in ("relay", "tap"):
            attrs.append("style=dashed")
        if e.style == "handoff":
            attrs.append("penwidth=2.5")
        if e.label:
            attrs.append(f'label="{_q(e.label)}"')
        out.append(f"  {_nid(e.src)} -> {_nid(e.dst)} [{', '.join(attrs)}];")
    out.append("}")
    return "\n".join(out) + "\n"
