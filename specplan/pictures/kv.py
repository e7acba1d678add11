"""The KV handoff picture: both instances' rank grids side by side, an arrow from every prefill
rank to every decode rank that pulls from it, coloured by the prefill stage it comes from.

Input is plain data (`specplan.deploy.picture.kv_picture_data`): each instance's ranks with
their stage and label, and the links (prefill rank, decode rank, stage, layers). Worked
example, 8 ranks: prefill tp 2 x pp 2 (p0..p3) -> decode tp 4 (d0..d3): d0 and d1 pull p0
(stage 0) and p2 (stage 1); d2 and d3 pull p1 and p3: eight arrows in two colours.
"""

from __future__ import annotations

from specplan.pictures.svg import LINE_H, PALETTE, STROKES, Canvas, text_width

MAX_RANKS = 64  # per instance; links to ranks not drawn are counted in a note
PER_ROW = 4
GAP_X = 220


def _grid(canvas: Canvas, inst: dict, x0: float, top: float, cell: tuple[float, float]) -> dict:
    """Draw one instance's box; rank -> (x, y) of its cell."""
    w, h = cell
    ranks = inst["ranks"][:MAX_RANKS]
    rows = -(-len(ranks) // PER_ROW)
    box_w = 24 + PER_ROW * (w + 10)
    canvas.rect(x0, top, box_w, 30 + rows * (h + 10), fill="#f6f6f6", stroke="#888", rx=8)
    canvas.text(x0 + 8, top + 16, inst["title"], anchor="start", bold=True, size=11)
    pos = {}
    for i, r in enumerate(ranks):
        row, col = divmod(i, PER_ROW)
        x, y = x0 + 12 + col * (w + 10), top + 26 + row * (h + 10)
        canvas.rect(x, y, w, h, fill=PALETTE[r["stage"] % len(PALETTE)], stroke="#555", rx=6,
                    tooltip=" ".join(r["label"]))
        canvas.text(x + w / 2, y + 14, r["label"])
        pos[r["rank"]] = (x, y)
    return pos


def render_svg(data: dict) -> str:
    labels = [s for inst in (data["prefill"], data["decode"]) for r in inst["ranks"] for s in r["label"]]
    w = max(70.0, max(text_width(s) for s in labels) + 14)
    h = 2 * LINE_H + 8
    canvas = Canvas(f"KV handoff of {data['name']}")
    canvas.text(16, 20, [data["title"], "fill: PP stage; arrows: prefill rank -> decode rank "
                         "pulling its KV, coloured by the prefill stage"], anchor="start")
    top = 20 + 2 * LINE_H + 12
    src = _grid(canvas, data["prefill"], 16, top, (w, h))
    right = 16 + 24 + PER_ROW * (w + 10) + GAP_X
    dst = _grid(canvas, data["decode"], right, top, (w, h))
    drawn = [ln for ln in data["links"] if ln["prefill"] in src and ln["decode"] in dst]
    for ln in drawn:
        (x0, y0), (x1, y1) = src[ln["prefill"]], dst[ln["decode"]]
        color = STROKES[ln["stage"] % len(STROKES)]
        canvas.line([(x0 + w, y0 + h / 2), (x1, y1 + h / 2)], color=color,
                    tooltip=f"p{ln['prefill']} -> d{ln['decode']}: stage {ln['stage']}, layers {ln['layers']}")
    hidden = len(data["links"]) - len(drawn)
    if hidden:
        canvas.text(16, canvas.height + 20, f"... {hidden} more links to ranks not drawn (first "
                    f"{MAX_RANKS} ranks of each instance shown; see explain --json)", anchor="start")
    return canvas.render()


def render_mermaid(data: dict) -> str:
    out = ["flowchart LR", f"  %% {data['title']}"]
    for role, tag in (("prefill", "p"), ("decode", "d")):
        inst = data[role]
        out.append(f'  subgraph {role}["{inst["title"]}"]')
        out += [f'    {tag}{r["rank"]}["{"<br/>".join(r["label"])}"]:::stage{r["stage"] % len(PALETTE)}'
                for r in inst["ranks"][:MAX_RANKS]]
        out.append("  end")
    out += [f'  p{ln["prefill"]} -->|"stage {ln["stage"]}"| d{ln["decode"]}' for ln in _drawn(data)]
    out += [f"  classDef stage{i} fill:{c},stroke:#555" for i, c in enumerate(PALETTE)]
    return "\n".join(out) + "\n"


def render_dot(data: dict) -> str:
    out = [f'digraph "{data["name"]}-kv" {{', '  graph [rankdir=LR, fontname="Helvetica"];',
           '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10];',
           f'  label="{data["title"]}";']
    for role, tag in (("prefill", "p"), ("decode", "d")):
        inst = data[role]
        out.append(f'  subgraph cluster_{role} {{ label="{inst["title"]}";')
        out += [f'    {tag}{r["rank"]} [label="{_dot_label(r["label"])}", '
                f'fillcolor="{PALETTE[r["stage"] % len(PALETTE)]}"];' for r in inst["ranks"][:MAX_RANKS]]
        out.append("  }")
    out += [f'  p{ln["prefill"]} -> d{ln["decode"]} [color="{STROKES[ln["stage"] % len(STROKES)]}", '
            f'label="stage {ln["stage"]}"];' for ln in _drawn(data)]
    out.append("}")
    return "\n".join(out) + "\n"


def _dot_label(lines: list[str]) -> str:
    return "\\n".join(lines)


def _drawn(data: dict) -> list[dict]:
    shown = {role: {r["rank"] for r in data[role]["ranks"][:MAX_RANKS]} for role in ("prefill", "decode")}
    return [ln for ln in data["links"] if ln["prefill"] in shown["prefill"] and ln["decode"] in shown["decode"]]


RENDER = {"svg": render_svg, "mermaid": render_mermaid, "dot": render_dot}
