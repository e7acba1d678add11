"""The round picture: the planned StageGraph, one block per round, one lane per pipeline stage.

Nodes are drawn by kind (decision hexagon, converge rounded orange, materialize green,
compute blue, commit grey); a converge is labelled with its site, its group family, the
global rank of its source (in the first group that holds the stage) and its bytes from the
plan. Edges: data (grey), decisions relayed across stages (orange, dashed), the stage
handoff of hidden states (navy, thick) and the taps the drafter reads (purple, dashed).

Worked example, 8 ranks (vllm tp=4, pp=2, dspark): the decode block has lanes "stage 0" and
"stage 1"; `dspark_draft` converges on both lanes over `replica` from rank 4 (member 4 of
[0..7]), and a tap edge joins target_verify@0 to target_verify@1.
"""

from __future__ import annotations

from dataclasses import dataclass

from specplan.ir.graph import StageGraph
from specplan.ir.nodes import ROUNDS, Node
from specplan.pictures.svg import LINE_H, Canvas, text_width
from specplan.plan import Plan
from specplan.views.round_view import human_bytes

FILL = {"decision": "#fff3b0", "converge": "#ffb870", "materialize": "#c7f0c2",
        "compute": "#a9c8f0", "commit": "#dddddd"}
EDGE = {"data": "#777777", "relay": "#e76f51", "handoff": "#1d3557", "tap": "#7b2cbf"}
NODE_GAP_X, NODE_GAP_Y, LANE_HEAD = 44, 14, 112
MAX_WIDTH, WRAP_GAP = 1600, 28  # a round wider than MAX_WIDTH pixels wraps onto rows of lanes
DP_AGREEMENT = "dp_token_counts"  # the DP-attention token-count all-gather (passes/dp_agreement)


@dataclass(frozen=True)
class Edge:
    src: str  # node id
    dst: str
    style: str  # data | relay | handoff | tap
    label: str


class RoundPicture:
    """Labels, positions and edges of a planned round graph; the three formats read it."""

    def __init__(self, graph: StageGraph, plan: Plan) -> None:
        self.graph, self.plan = graph, plan
        self.pp = len(plan.pipeline.stages)
        self.rounds = [r for r in ROUNDS if graph.nodes(round=r)]
        self.labels = {n.id: node_label(n, plan) for n in graph.nodes()}
        self.depth = _depths(graph)
        self.edges = self._edges()
        self.row_top: dict[str, float] = {}  # node id -> top of its row of lanes (render_svg)

    def _edges(self) -> list[Edge]:
        out = []
        for a, b, data in self.graph.edges():
            if a.round != b.round:
                continue
            carries = ", ".join(data["carries"])
            if data["kind"] == "pp_handoff":
                out.append(Edge(a.id, b.id, "handoff", carries or "handoff"))
            elif a.stage != b.stage:
                out.append(Edge(a.id, b.id, "relay", f"relay {carries}".strip()))
            else:
                out.append(Edge(a.id, b.id, "data", carries))
        return out + self._tap_edges()

    def _tap_edges(self) -> list[Edge]:
        pipe = self.plan.pipeline
        links = getattr(pipe.routing, pipe.aux_routing, ())  # `dropped` routes nothing
        out = []
        for rnd in self.rounds:
            targets = {n.stage: n for n in self.graph.nodes(kind="compute", round=rnd)
                       if str(n.attr("compute", "")).startswith("target")}
            for link in links:
                a, b = link.link
                if a in targets and b in targets:
                    out.append(Edge(targets[a].id, targets[b].id, "tap",
                                    f"taps {link.taps}: {human_bytes(link.bytes)} ({pipe.aux_routing})"))
        return out

    def cells(self, rnd: str) -> dict[tuple[int, int], list[Node]]:
        """(stage, depth) -> the nodes drawn there, stacked."""
        out: dict[tuple[int, int], list[Node]] = {}
        for n in self.graph.nodes(round=rnd):
            out.setdefault((n.stage, self.depth[n.id]), []).append(n)
        return out


def node_label(node: Node, plan: Plan) -> list[str]:
    """The lines a node is labelled with, in every format."""
    if node.kind == "converge":
        return converge_label(node, plan)
    if node.kind == "decision":
        dims = node.attr("shape", ())
        shape = " x ".join(_term(d) if len(dims) > 1 else str(d) for d in dims) or "scalar"
        return [node.name, f"{node.attr('nature')} {node.attr('dtype')} [{shape}]"]
    if node.kind == "compute":
        return [node.name, f"{node.attr('compute')} x {_term(node.attr('forwards', 1))}"]
    if node.kind == "materialize":
        n = len(node.attr("derives", ()))
        return [node.name, f"derives {n} value{'' if n == 1 else 's'}"]
    after = node.name.removeprefix("commit_")  # commit nodes are named commit_<phase>
    return ["commit", f"after {after}"] if after not in ("commit", node.name) else ["commit"]


def _term(dim) -> str:
    """A dimension or count as a factor: `num_steps - 1` is written `(num_steps - 1)`."""
    text = str(dim)
    return f"({text})" if any(op in text for op in (" ", "+", "-", "*")) else text


def converge_label(node: Node, plan: Plan) -> list[str]:
    """[site, 'group FAMILY', 'src rank R', 'N B']: group, source and bytes from the plan."""
    site = converge_site(node, plan)
    family = site.family if site else node.attr("family")
    member = site.source_member if site else node.attr("source_member", 0)
    source = f"src rank {source_rank(plan, family, member, node.stage)}" if member >= 0 \
        else f"every rank ({site.op if site else 'all-gather'})"
    size = f"{site.bytes} B" if site else "? B"
    if site and site.trivial:
        size += " (no-op: 1 rank)"
    if site and not site.converge:
        size += " (not converged)"
    return [node.name, f"group {family}", source, size]


@dataclass(frozen=True)
class ConvergeLabel:
    """What a converge node's label shows: its group, source, total bytes and whether it runs."""

    family: str
    source_member: int
    bytes: int
    op: str = "broadcast"
    trivial: bool = False
    converge: bool = True


def converge_site(node: Node, plan: Plan) -> ConvergeLabel | None:
    """The plan's site (or relay site) a converge node stands for, with its total bytes."""
    for s in plan.sites:
        if s.name == node.name and s.round == node.round:
            return ConvergeLabel(s.family, s.source_member, sum(d.bytes for d in s.decisions),
                                 s.kind, s.trivial, s.converge)
    dp = plan.dp_agreement
    if dp and node.name == DP_AGREEMENT:
        return ConvergeLabel(dp.family, -1, dp.bytes, dp.op)
    for r in plan.relays:
        if f"relay_{r.site}" == node.name and r.round == node.round:
            return ConvergeLabel(r.family, r.source_member, r.bytes)
    return None


def source_rank(plan: Plan, family: str, member: int, stage: int) -> int:
    """Global rank of `member` in the family's first group that holds a rank of `stage`."""
    stage_of = plan.stages
    for group in plan.groups(family):
        if any(stage_of[r] == stage for r in group):
            return group[min(member, len(group) - 1)]
    return member


def _depths(graph: StageGraph) -> dict[str, int]:
    """Longest dependency path to each node inside its own round: its column."""
    depth: dict[str, int] = {}
    for n in graph.topological():
        preds = [p for p in graph.predecessors(n) if p.round == n.round]
        depth[n.id] = max((depth[p.id] + 1 for p in preds), default=0)
    return depth


# -- SVG --------------------------------------------------------------------------------

def render_svg(pic: RoundPicture) -> str:
    lines = max(len(v) for v in pic.labels.values())
    node_w = max(text_width(s) for v in pic.labels.values() for s in v) + 20
    node_h = lines * LINE_H + 10
    canvas = Canvas(f"round graph of {pic.plan.name}")
    canvas.text(16, 20, f"{pic.plan.name}: round graph ({pic.plan.engine}, pp {pic.pp}, "
                        f"method {pic.plan.speculative.method})", anchor="start", bold=True)
    y = _legend(canvas, 36)
    boxes: dict[str, tuple[float, float]] = {}
    for rnd in pic.rounds:  # lanes first, then edges, then nodes on top of the edges
        y = _round_lanes(canvas, pic, rnd, y, node_w, node_h, boxes) + 18
    for e in pic.edges:
        _edge(canvas, e, boxes, node_w, node_h, pic.row_top)
    for n in pic.graph.nodes():
        x, ny = boxes[n.id]
        _node(canvas, n, pic.labels[n.id], x, ny, node_w, node_h)
    return canvas.render()


def _round_lanes(canvas: Canvas, pic: RoundPicture, rnd: str, top: float, node_w: float,
                 node_h: float, boxes: dict) -> float:
    """Draw the round's lanes, place its nodes in `boxes`; returns the block's bottom. A round
    deeper than MAX_WIDTH allows wraps: its columns continue below in as many rows of lanes as
    they need (lanes labelled "stage S, cont."), so the picture stays readable at any depth."""
    cells = pic.cells(rnd)
    cols = max(d for _, d in cells) + 1
    per_row = max(1, int((MAX_WIDTH - 32 - LANE_HEAD) // (node_w + NODE_GAP_X)))  # 16 px margins
    canvas.text(16, top + 14, f"{rnd} round", anchor="start", bold=True, size=12)
    y = top + 24
    for first in range(0, cols, per_row):
        row_top = y
        width = LANE_HEAD + min(per_row, cols - first) * (node_w + NODE_GAP_X)
        for stage in range(pic.pp):
            row = {d - first: v for (st, d), v in cells.items() if st == stage and first <= d < first + per_row}
            stack = max((len(v) for v in row.values()), default=0)
            lane_h = max(1, stack) * (node_h + NODE_GAP_Y) + NODE_GAP_Y
            canvas.rect(16, y, width, lane_h, fill="#fafafa" if stage % 2 else "#f0f4f8", stroke="#bbb",
                        cls="lane")
            label, cls = (f"stage {stage}", "lane-label") if not first else (f"stage {stage}, cont.", "lane-cont")
            canvas.text(24, y + lane_h / 2 + 4, label, anchor="start", bold=True, cls=cls)
            for col, nodes in row.items():
                for i, n in enumerate(nodes):
                    boxes[n.id] = (16 + LANE_HEAD + col * (node_w + NODE_GAP_X),
                                   y + NODE_GAP_Y + i * (node_h + NODE_GAP_Y))
                    pic.row_top[n.id] = row_top
            y += lane_h
        y += WRAP_GAP if first + per_row < cols else 0
    return y


def _node(canvas: Canvas, n: Node, label: list[str], x: float, y: float, w: float, h: float) -> None:
    fill, tip = FILL[n.kind], f"{n.kind} {n.id}"
    if n.kind == "decision":
        pts = [(x + 10, y), (x + w - 10, y), (x + w, y + h / 2), (x + w - 10, y + h), (x + 10, y + h),
               (x, y + h / 2)]
        canvas.polygon(pts, fill=fill, tooltip=tip, cls="node-decision")
    elif n.kind == "commit":
        canvas.ellipse(x + w / 2, y + h / 2, w / 2, h / 2, fill=fill, tooltip=tip, cls="node-commit")
    else:
        rx = {"converge": 14, "materialize": 2, "compute": 4}[n.kind]
        width = 2 if n.kind == "converge" else 1
        canvas.rect(x, y, w, h, fill=fill, rx=rx, width=width, tooltip=tip, cls=f"node-{n.kind}")
    top = y + h / 2 - (len(label) - 1) * LINE_H / 2 + 4
    canvas.text(x + w / 2, top, label, cls="node-label")


def _edge(canvas: Canvas, e: Edge, boxes: dict, w: float, h: float, row_top: dict) -> None:
    (x1, y1), (x2, y2) = boxes[e.src], boxes[e.dst]
    shift = 10 if e.style == "tap" else 0
    a, b = (x1 + w, y1 + h / 2 + shift), (x2, y2 + h / 2 + shift)
    mid = a[0] + NODE_GAP_X / 2 - (10 if e.style == "tap" else 0)
    if a[0] < b[0]:
        points = [a, (mid, a[1]), (mid, b[1]), b]
    elif y2 > y1:  # wrapped onto a later row: down the gap after the source, left above that row
        above = row_top[e.dst] - WRAP_GAP / 2
        back = b[0] - 8
        points = [a, (mid, a[1]), (mid, above), (back, above), (back, b[1]), b]
    else:
        points = [a, b]
    dash = {"relay": "6 4", "tap": "3 3"}.get(e.style)
    width = 2.5 if e.style == "handoff" else 1.2
    label = e.label if e.style in ("handoff", "tap") else None
    canvas.line(points, color=EDGE[e.style], width=width, dash=dash, label=label,
                label_dy=10 if e.style == "tap" else -4, label_left=e.style == "tap",
                tooltip=f"{e.style}: {e.src} -> {e.dst}" + (f" [{e.label}]" if e.label else ""),
                cls=f"edge-{e.style}")


def _legend(canvas: Canvas, y: float) -> float:
    x = 16.0
    for kind, fill in FILL.items():
        canvas.rect(x, y, 14, 12, fill=fill, rx=3)
        canvas.text(x + 18, y + 10, kind, anchor="start", size=10)
        x += 30 + text_width(kind, 10)
    for style, color in EDGE.items():
        canvas.line([(x, y + 6), (x + 24, y + 6)], color=color, width=2, arrow=False,
                    dash={"relay": "6 4", "tap": "3 3"}.get(style))
        canvas.text(x + 28, y + 10, style, anchor="start", size=10)
        x += 40 + text_width(style, 10)
    return y + 26
