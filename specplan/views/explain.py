"""`specplan explain`: the group layout of a spec, as data and as readable tables.

`explain_data` builds the JSON object (stable keys: world_size, num_worlds, engine,
widths, groups, ranks, replicas, stages); `render` prints it with rich, trimming long
listings so that 65,536 ranks stay readable (the JSON is always complete). With `lazy`, the
groups, rank rows and replicas are listings made on demand (explain_stream.py), which the
CLI streams to JSON and indexes for one rank: the same content, never held at once.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from specplan.mesh import Mesh
from specplan.schema import Spec

SHOW_GROUPS = 8
SHOW_RANKS = 64


def explain_data(spec: Spec, mesh: Mesh, lazy: bool = False) -> dict[str, Any]:
    from specplan.engines import convention, shown_version
    from specplan.views.explain_stream import Groups, Replicas, Rows

    ranks = Rows(mesh) if lazy else _rank_rows(mesh)
    s = spec.speculative
    version = shown_version(spec)
    return {
        "name": spec.name,
        "engine": mesh.engine,
        **({"engine_version": version} if version else {}),
        "world_size": mesh.world_size,
        "num_worlds": mesh.num_worlds,
        "nodes": spec.topology.nodes,
        "gpus_per_node": mesh.gpus_per_node,
        "warnings": [w for w in (convention(mesh.engine).world_warning(mesh.world_size, mesh.num_worlds),) if w],
        "widths": mesh.widths,
        "derived": mesh.derived,
        "groups": {fam.name: Groups(fam) if lazy else fam.groups() for fam in mesh.families},
        "aliases": {fam.name: fam.alias for fam in mesh.families if fam.alias},
        "ranks": ranks,
        "replicas": Replicas(mesh) if lazy else [
            {"index": r.index, "ranks": list(r.ranks), "source": r.source} for r in mesh.replicas],
        "stages": [{"pp_rank": st.pp_rank, "start_layer": st.start_layer, "end_layer": st.end_layer,
                    "taps": list(st.taps)} for st in mesh.stages],
        "speculative": {"method": s.method, "num_steps": s.num_steps, "topk": s.topk,
                        "num_draft_tokens": s.verify_width, "sampling": s.sampling,
                        "taps": list(s.taps(spec.model.num_layers))},
    }


def _rank_rows(mesh: Mesh) -> list[dict[str, int]]:
    """One row per rank; built column-wise, as 65,536 ranks x a dozen keys add up."""
    coords = mesh.coords
    world, per_node = mesh.world_size, mesh.gpus_per_node
    keys = ("rank", "node", "local_rank", *coords, "replica")
    columns = (range(world), (r // per_node for r in range(world)), (r % per_node for r in range(world)),
               *coords.values(), mesh.replica_of)
    return [dict(zip(keys, values)) for values in zip(*columns)]


def render(data: dict[str, Any], console: Console, rank: int | None = None,
           all_families: bool = False) -> None:
    """The tables; families of one-rank groups (no traffic) only with `all_families`."""
    if rank is not None:
        _render_rank(data, console, rank, all_families)
        return
    _header(data, console)
    _families(data, console, all_families)
    _ranks(data, console)
    _stages(data, console)
    _replicas(data, console)


def _header(data: dict, console: Console) -> None:
    worlds = f" x {data['num_worlds']} independent worlds" if data["num_worlds"] > 1 else ""
    release = f" {data['engine_version']}" if "engine_version" in data else ""
    console.print(Text.assemble((data["name"], "bold"), f"  engine {data['engine']}{release}  world "
                                f"{data['world_size']}{worlds}  nodes {data['nodes']} x "
                                f"{data['gpus_per_node']} GPUs"))
    for warning in data["warnings"]:
        console.print(f"WARN {warning}", markup=False)
    console.print("widths   " + ", ".join(f"{k} {v}" for k, v in data["widths"].items()))
    console.print("derived  " + ", ".join(f"{k} {v}" for k, v in data["derived"].items()))
    sp = data["speculative"]
    console.print(f"speculative {sp['method']}: num_steps {sp['num_steps']}, topk {sp['topk']}, "
                  f"verify width {sp['num_draft_tokens']}, sampling {sp['sampling']}, taps {sp['taps'] or '-'}")


def _families(data: dict, console: Console, all_families: bool) -> None:
    """Families in creation order, each one's groups listed in rank order (vLLM creates its dp
    groups pp-column by pp-column; the JSON keeps the creation order)."""
    table = Table(title="group families (in creation order)", title_justify="left")
    for col in ("family", "groups", "size", "members"):
        table.add_column(col)
    hidden = [name for name, groups in data["groups"].items() if len(groups[0]) == 1 and not all_families]
    for name, groups in data["groups"].items():
        if name in hidden:
            continue
        groups = _smallest(groups, SHOW_GROUPS)
        shown = " ".join(_ranks_str(g) for g in groups[:SHOW_GROUPS])
        total = len(data["groups"][name])
        if total > SHOW_GROUPS:
            shown += f" ... (+{total - SHOW_GROUPS})"
        alias = data["aliases"].get(name)
        label = f"{name} (= {alias})" if alias else name
        table.add_row(label, str(total), str(len(groups[0])), shown)
    console.print(table)
    if hidden:
        console.print(Text(f"families of one-rank groups, hidden: {', '.join(hidden)} "
                           "(--all-families shows them)"))


def _ranks(data: dict, console: Console) -> None:
    rows = data["ranks"]
    table = Table(title="ranks", title_justify="left")
    keys = list(rows[0])
    for key in keys:
        table.add_column(key, justify="right")
    for row in rows[:SHOW_RANKS]:
        table.add_row(*(str(row[k]) for k in keys))
    console.print(table)
    if len(rows) > SHOW_RANKS:
        console.print(f"... {len(rows) - SHOW_RANKS} more ranks (use --rank R or --json)")


def _stages(data: dict, console: Console) -> None:
    table = Table(title="pipeline stages", title_justify="left")
    for col in ("pp_rank", "layers [start, end)", "count", "taps produced"):
        table.add_column(col)
    for st in data["stages"]:
        table.add_row(str(st["pp_rank"]), f"[{st['start_layer']}, {st['end_layer']})",
                      str(st["end_layer"] - st["start_layer"]), ", ".join(map(str, st["taps"])) or "-")
    console.print(table)


def _replicas(data: dict, console: Console) -> None:
    table = Table(title="replicas (ranks that serve the same requests)", title_justify="left")
    for col in ("replica", "source", "ranks"):
        table.add_column(col)
    for rep in data["replicas"][:SHOW_RANKS]:
        table.add_row(str(rep["index"]), str(rep["source"]), _ranks_str(rep["ranks"]))
    console.print(table)
    if len(data["replicas"]) > SHOW_RANKS:
        console.print(f"... {len(data['replicas']) - SHOW_RANKS} more replicas")


def rank_data(data: dict[str, Any], rank: int) -> dict[str, Any]:
    """One rank's view (`explain --rank R`, also as --json): its row, its group in every
    family, its replica and source, its stage, and its stage's collectives per round."""
    row = data["ranks"][rank]
    groups = {}
    for name, family in data["groups"].items():
        group_rank, group = _group_of(family, rank)
        groups[name] = {"group_rank": group_rank, "ranks": group}
    rep = data["replicas"][row["replica"]]
    stage = data["stages"][row["pp"]]
    rounds: dict[str, Any] = next((c["rounds"] for c in data.get("round", {}).get("per_rank_class", [])
                   if c["rule"].get("pp", 0) == row["pp"]), {})
    return {"name": data["name"], "engine": data["engine"], "world_size": data["world_size"],
            "fingerprint": data.get("round", {}).get("fingerprint"), "rank": rank, "row": row,
            "groups": groups, "replica": rep, "source": rep["source"],
            "is_source": rep["source"] == rank, "stage": stage, "rounds": rounds}


def _smallest(groups, k: int) -> list[list[int]]:
    """The first k of the groups in sorted order (a lazy listing computes them directly)."""
    return groups.smallest(k) if hasattr(groups, "smallest") else sorted(groups)[:k]


def _group_of(family, rank: int) -> tuple[int, list[int]]:
    """(group rank, group) of `rank`: from the family rule when the listing is lazy."""
    if hasattr(family, "group_of"):
        return family.group_of(rank)
    group = next(g for g in family if rank in g)
    return group.index(rank), group


def _render_rank(data: dict, console: Console, rank: int, all_families: bool = False) -> None:
    view = rank_data(data, rank)
    row, rep, stage = view["row"], view["replica"], view["stage"]
    console.print(Text.assemble((f"rank {rank}", "bold"), f" of {data['world_size']}: node "
                                f"{row['node']}, local rank {row['local_rank']}"))
    table = Table(title="groups of this rank", title_justify="left")
    for col in ("family", "group rank", "group"):
        table.add_column(col)
    hidden = [name for name, g in view["groups"].items() if len(g["ranks"]) == 1 and not all_families]
    for name, g in view["groups"].items():
        if name not in hidden:
            table.add_row(name, str(g["group_rank"]), _ranks_str(g["ranks"]))
    console.print(table)
    if hidden:
        console.print(Text(f"one-rank groups, hidden: {', '.join(hidden)} (--all-families shows them)"))
    role = "source" if view["is_source"] else f"takes decisions from rank {rep['source']}"
    console.print(f"replica {rep['index']} ({role}); stage {stage['pp_rank']}: layers "
                  f"[{stage['start_layer']}, {stage['end_layer']}), taps {stage['taps'] or '-'}")


def _ranks_str(ranks: list[int]) -> str:
    span = len(ranks) > 2 and ranks[-1] - ranks[0] + 1 == len(ranks)  # else no list of the span
    if span and ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"[{ranks[0]}-{ranks[-1]}]"
    if len(ranks) > 12:
        return "[" + ",".join(map(str, ranks[:12])) + f",...+{len(ranks) - 12}]"
    return "[" + ",".join(map(str, ranks)) + "]"
