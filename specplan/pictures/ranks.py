"""The rank picture: nodes as boxes of GPUs, each rank coloured by its replica and labelled
with its coordinates, the groups of one family outlined.

Input is `explain_data`'s dict (ranks, groups, replicas, node sizes), so the picture shows
exactly what `specplan explain` prints. Worked example, 8 ranks (sglang tp=4, pp=2, one
node): one node box with ranks r0..r7 in a row; replica 0 colours them all; with
`--family tp` the groups [0-3] and [4-7] are outlined; r4 (the last stage's first rank)
is marked as the replica's decision source.
"""

from __future__ import annotations

from specplan.pictures.svg import LINE_H, PALETTE, STROKES, Canvas, text_width

MAX_RANKS = 256  # ranks drawn; the rest are counted in a note
PER_ROW = 8  # GPUs per row inside a node box
SHORT = {"attn_tp": "a_tp", "attn_dp": "a_dp", "attn_cp": "a_cp", "moe_ep": "m_ep",
         "moe_tp": "m_tp", "moe_dp": "m_dp"}
NOT_AXES = ("rank", "node", "local_rank", "replica")


def default_family(data: dict) -> str:
    """The group a replica's decisions converge over: attn_tp under DP-attention, else tp."""
    if data["derived"].get("attn_dp", 1) > 1:  # only SGLang derives attn_dp
        return "attn_tp"
    return "tp"


def shown_axes(data: dict) -> list[str]:
    """Axes whose coordinate varies over the world (a width-1 axis is always 0)."""
    rows = data["ranks"]
    axes = [k for k in rows[0] if k not in NOT_AXES]
    return [a for a in axes if any(r[a] for r in rows)]


def rank_label(row: dict, axes: list[str]) -> list[str]:
    """['r5', 'tp5 a_tp1 a_dp2']: the rank, then its varying coordinates, three per line."""
    coords = [f"{SHORT.get(a, a)}{row[a]}" for a in axes]
    lines = [f"r{row['rank']}"]
    for i in range(0, len(coords), 3):
        lines.append(" ".join(coords[i:i + 3]))
    return lines


def drawn_ranks(data: dict) -> list[dict]:
    return data["ranks"][:MAX_RANKS]


def group_name(family: str, index: int) -> str:
    return f"{family} g{index}"


def _header(data: dict, family: str) -> list[str]:
    groups = data["groups"][family]
    worlds = f" x {data['num_worlds']} independent worlds (one drawn)" if data["num_worlds"] > 1 else ""
    return [f"{data['name']}: engine {data['engine']}, world {data['world_size']}{worlds}, "
            f"{data['nodes']} node(s) x {data['gpus_per_node']} GPUs",
            f"fill: replica ({len(data['replicas'])}); outline: {family} groups "
            f"({len(groups)} x {len(groups[0])}); thick border: replica source"]


def _positions(data: dict, cell_w: float, cell_h: float, top: float) -> tuple[dict, list]:
    """rank -> (x, y, row key) of its cell, and the node boxes (x, y, w, h, title)."""
    per_node = data["gpus_per_node"]
    cols = min(PER_ROW, per_node)
    rows_per_node = -(-per_node // cols)
    gap, pad, head = 14, 12, 22
    box_w = pad * 2 + cols * cell_w + (cols - 1) * gap
    box_h = head + pad + rows_per_node * (cell_h + gap + 6)
    pos: dict[int, tuple[float, float, tuple[int, int]]] = {}
    boxes: list[tuple[float, float, float, float, int]] = []
    for row in drawn_ranks(data):
        node, local = row["node"], row["local_rank"]
        y0 = top + node * (box_h + 16)
        if not boxes or boxes[-1][4] != node:
            boxes.append((16, y0, box_w, box_h, node))
        r, c = divmod(local, cols)
        x = 16 + pad + c * (cell_w + gap)
        y = y0 + head + 6 + r * (cell_h + gap + 6)
        pos[row["rank"]] = (x, y, (node, r))
    return pos, boxes


def render_svg(data: dict, family: str) -> str:
    axes = shown_axes(data)
    labels = {row["rank"]: rank_label(row, axes) for row in drawn_ranks(data)}
    lines = max(len(v) for v in labels.values())
    cell_w = max(64.0, max(text_width(s) for v in labels.values() for s in v) + 14)
    cell_h = lines * LINE_H + 10
    canvas = Canvas(f"ranks of {data['name']} ({family} groups outlined)")
    canvas.text(16, 20, _header(data, family), anchor="start", bold=False)
    top = 20 + 2 * LINE_H + 16
    pos, boxes = _positions(data, cell_w, cell_h, top)
    for x, y, w, h, node in boxes:
        canvas.rect(x, y, w, h, fill="#f6f6f6", stroke="#888", rx=8, cls="node")
        canvas.text(x + 8, y + 15, f"node {node}", anchor="start", bold=True, size=11)
    sources = {rep["source"] for rep in data["replicas"]}
    for row in drawn_ranks(data):
        x, y, _ = pos[row["rank"]]
        fill = PALETTE[row["replica"] % len(PALETTE)]
        is_src = row["rank"] in sources
        canvas.rect(x, y, cell_w, cell_h, fill=fill, stroke="#111" if is_src else "#555", rx=6,
                    width=2.5 if is_src else 1, cls="rank",
                    tooltip=f"rank {row['rank']}: replica {row['replica']}, node {row['node']}, "
                            f"local rank {row['local_rank']}" + (" (replica source)" if is_src else ""))
        canvas.text(x + cell_w / 2, y + 15, labels[row["rank"]], cls="rank-label")
    _outline_groups(canvas, data["groups"][family], family, pos, cell_w, cell_h)
    note_y = max(y + h for _, y, _, h, _ in boxes) + 20
    hidden = data["world_size"] - len(drawn_ranks(data))
    if hidden > 0:
        canvas.text(16, note_y, f"... {hidden} more ranks not drawn (first {MAX_RANKS} of "
                                f"{data['world_size']} shown; see specplan explain --json)",
                    anchor="start", cls="more")
        note_y += LINE_H + 6
    _legend(canvas, data, note_y)
    return canvas.render()


def _outline_groups(canvas: Canvas, groups: list[list[int]], family: str, pos: dict,
                    cell_w: float, cell_h: float) -> None:
    """One rounded outline per run of adjacent cells of a group; runs of one group joined."""
    for index, group in enumerate(groups):
        color = STROKES[index % len(STROKES)]
        runs = _runs([r for r in group if r in pos], pos, cell_w)
        centres = []
        for x0, x1, y in runs:
            canvas.rect(x0 - 4, y - 4, x1 - x0 + 8, cell_h + 8, stroke=color, rx=9, width=2,
                        dash="6 3", cls="group", tooltip=f"{group_name(family, index)}: ranks {group}")
            centres.append(((x0 + x1) / 2, y + cell_h + 4))
        if runs:
            x0, _, y = runs[0]
            canvas.text(x0 - 2, y + cell_h + 16, group_name(family, index), anchor="start",
                        size=9, color=color, cls="group-label")
        for a, b in zip(centres, centres[1:]):
            canvas.line([a, b], color=color, dash="2 3", arrow=False)


def _runs(ranks: list[int], pos: dict, cell_w: float) -> list[tuple[float, float, float]]:
    """(x start, x end, y) of each maximal run of horizontally adjacent cells."""
    cells = sorted((pos[r][2], pos[r][0], pos[r][1]) for r in ranks)
    runs: list[list] = []
    for key, x, y in cells:
        if runs and runs[-1][3] == key and x - runs[-1][1] < cell_w * 1.5:
            runs[-1][1] = x + cell_w
            continue
        runs.append([x, x + cell_w, y, key])
    return [(a, b, y) for a, b, y, _ in runs]


def _legend(canvas: Canvas, data: dict, y: float) -> None:
    x = 16.0
    for rep in data["replicas"][:len(PALETTE)]:
        label = f"replica {rep['index']} (src r{rep['source']})"
        canvas.rect(x, y - 10, 12, 12, fill=PALETTE[rep["index"] % len(PALETTE)], stroke="#555")
        canvas.text(x + 16, y, label, anchor="start", size=10)
        x += 16 + text_width(label, 10) + 14
    if len(data["replicas"]) > len(PALETTE):
        canvas.text(x, y, f"(colours repeat every {len(PALETTE)} replicas)", anchor="start", size=10)


# -- text forms -------------------------------------------------------------------------

def _by_node(data: dict) -> dict[int, list[dict]]:
    """The drawn ranks by node, nodes in the order their first rank is drawn."""
    by_node: dict[int, list[dict]] = {}
    for row in drawn_ranks(data):
        by_node.setdefault(row["node"], []).append(row)
    return by_node


def render_mermaid(data: dict, family: str) -> str:
    axes = shown_axes(data)
    out = ["flowchart TB", f"  %% {_header(data, family)[0]}"]
    for node, rows in _by_node(data).items():
        out.append(f'  subgraph node{node}["node {node}"]')
        out += [f'    r{row["rank"]}["{"<br/>".join(rank_label(row, axes))}"]:::rep{row["replica"] % len(PALETTE)}'
                for row in rows]
        out.append("  end")
    out += _group_links(data, family, lambda a, b, g: f'  r{a} ---|"{g}"| r{b}')
    hidden = data["world_size"] - len(drawn_ranks(data))
    if hidden > 0:
        out.append(f'  more["... {hidden} more ranks"]')
    out += [f"  classDef rep{i} fill:{c},stroke:#555" for i, c in enumerate(PALETTE)]
    return "\n".join(out) + "\n"


def render_dot(data: dict, family: str) -> str:
    axes = shown_axes(data)
    out = [f'digraph "{data["name"]}-ranks" {{', '  graph [rankdir=TB, fontname="Helvetica"];',
           '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10];',
           f'  label="{_header(data, family)[0]}";']
    for node, rows in _by_node(data).items():
        out.append(f'  subgraph cluster_node{node} {{ label="node {node}";')
        out += [f'    r{row["rank"]} [label="{_dot_label(rank_label(row, axes))}", '
                f'fillcolor="{PALETTE[row["replica"] % len(PALETTE)]}"];' for row in rows]
        out.append("  }")
    out += _group_links(data, family, lambda a, b, g: f'  r{a} -> r{b} [dir=none, style=dashed, label="{g}"];')
    hidden = data["world_size"] - len(drawn_ranks(data))
    if hidden > 0:
        out.append(f'  more [shape=plaintext, label="... {hidden} more ranks"];')
    out.append("}")
    return "\n".join(out) + "\n"


def _dot_label(lines: list[str]) -> str:
    return "\\n".join(lines)


def _group_links(data: dict, family: str, fmt) -> list[str]:
    """Each group as a chain of links between its drawn members, named by the group."""
    drawn = {row["rank"] for row in drawn_ranks(data)}
    out = []
    for index, group in enumerate(data["groups"][family]):
        members = [r for r in group if r in drawn]
        out += [fmt(a, b, group_name(family, index)) for a, b in zip(members, members[1:])]
    return out
