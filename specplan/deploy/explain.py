"""`specplan explain DEPLOYMENT`: each instance's explain object, and the KV handoff, grouped.

JSON keys: name, connector, rules (the engine function the handoff follows), files
({prefill, decode}: where each instance is written), instances
({prefill, decode}: each the explain object of a single spec), kv_handoff (one entry per
decode rank), kv_handoff_refused (why the engines refuse the pairing, when they do).
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from specplan.deploy.handoff import Handoff, plan_handoff
from specplan.deploy.load import InstancePair

SHOW_ROWS = 32
ROLE_ROUNDS = {  # what passes.build_round.planned_rounds plans per role
    "prefill": "plans the prefill round only (the target's prompt forward and the drafter's "
               "prefill-time draft extend), then hands the request and its KV to decode",
    "decode": "plans the decode rounds only, from the prompt's KV it receives (KV handoff below)",
}


def instance_data(spec) -> dict[str, Any]:
    """The explain object of one instance, exactly as `specplan explain SPEC --json` prints it."""
    from specplan.views.explain import explain_data
    from specplan.lower import build_plan
    from specplan.passes import plan as run_passes
    from specplan.views.round_view import round_data

    planning = run_passes(spec)
    data = explain_data(spec, planning.mesh)
    data["round"] = round_data(build_plan(planning))
    return data


def deployment_data(dep: InstancePair, handoff: Handoff | None = None) -> dict[str, Any]:
    h = handoff or plan_handoff(dep)
    return {
        "name": dep.name,
        "connector": dep.connector,
        "rules": h.rules.function,
        "files": {i.role: i.file for i in dep.instances},
        "instances": {i.role: instance_data(i.spec) for i in dep.instances},
        "kv_handoff": h.entries,
        "kv_handoff_refused": [r.message for r in h.refusals],
    }


def render_deployment(data: dict, console: Console) -> None:
    from specplan.views.explain import render

    pre, dec = data["instances"]["prefill"], data["instances"]["decode"]
    console.print(f"[bold]{data['name']}[/bold]  prefill {pre['name']} ({pre['engine']}, "
                  f"{pre['world_size'] * pre['num_worlds']} ranks) -> decode {dec['name']} "
                  f"({dec['engine']}, {dec['world_size'] * dec['num_worlds']} ranks), "
                  f"connector {data['connector']}")
    for role in ("prefill", "decode"):
        console.rule(f"{role}: {data['files'][role]}")
        console.print(ROLE_ROUNDS[role])
        render(data["instances"][role], console)
    console.rule("KV handoff")
    console.print(f"rules: {data['rules']}")
    for reason in data["kv_handoff_refused"]:
        console.print(f"refused: {reason}", markup=False)
    _handoff_table(data["kv_handoff"], console)


def group_handoff(entries: list[dict]) -> list[tuple[list[int], dict]]:
    """Decode ranks that pull the same thing, grouped: (ranks, the entry without its rank)."""
    groups: dict[str, tuple[list[int], dict]] = {}
    for e in entries:
        rest = {k: v for k, v in e.items() if k != "decode_rank"}
        key = repr(sorted(rest.items()))
        groups.setdefault(key, ([], rest))[0].append(e["decode_rank"])
    return list(groups.values())


def _handoff_table(entries: list[dict], console: Console) -> None:
    from specplan.views.explain import _ranks_str

    if not entries:
        return
    groups = group_handoff(entries)
    table = Table(title="KV handoff (decode ranks pulling the same slices, grouped)",
                  title_justify="left")
    for col in ("decode ranks", "prefill dp", "tp ranks", "cp ranks", "pp ranks", "layers",
                "KV heads", "responses", "consumers per source"):
        table.add_column(col)
    for ranks, e in groups[:SHOW_ROWS]:
        heads = f"{e['head_offset']}..{e['head_offset'] + e['head_count'] - 1}"
        table.add_row(_ranks_str(ranks), str(e["prefill_dp_rank"]), _ranks_str(e["prefill_tp_ranks"]),
                      _ranks_str(e["prefill_cp_ranks"]), _ranks_str(e["prefill_pp_ranks"]),
                      " ".join(f"[{a},{b})" for a, b in e["layers"]), heads,
                      str(e["responses_expected"]), str(e["consumers_per_source"]))
    console.print(table)
    if len(groups) > SHOW_ROWS:
        console.print(f"... {len(groups) - SHOW_ROWS} more groups (use --json)")
