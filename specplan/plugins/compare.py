"""Is the deployment the engine built the plan? Its groups and speculative settings, compared.

Torch-free: `compare` runs without an engine (a test, a notebook, `specplan check`'s laptop),
and the plugins call `startup_check` right after the engine's initialize_model_parallel.
Every rank compares every group of every family (not only its own), so all ranks reach the
same verdict and refuse together: none waits in a collective for a peer that already left.

Worked example, 8 ranks, plan sglang tp 4 x pp 2 (attn_tp [0..3] [4..7]); an engine started
with DP-attention dp 2 built attn_tp [0,1] [2,3] [4,5] [6,7]. Rank 5's message names its own
groups: `attn_tp: engine [4,5], plan [4..7]`.
"""

from __future__ import annotations

from collections.abc import Iterable

from specplan.verify.findings import Finding
from specplan.plan.load import PlanSource
from specplan.plan import PlanView, load_plan

# The engine's speculative settings, under the plan's key names (what `engine_spec` holds).
SPEC_KEYS = ("method", "num_steps", "topk", "num_draft_tokens", "aux_layers", "draft_layer_ids")


def plan_settings(view: PlanView) -> dict:
    """The plan's value of every SPEC_KEYS key (aux_layers = tap ids, draft-layer ids global)."""
    sp, drafter = view.plan.speculative, view.plan.pipeline.drafter
    return dict(zip(SPEC_KEYS, (sp.method, sp.num_steps, sp.topk, sp.num_draft_tokens, list(sp.taps),
                                list(drafter.layer_ids) if drafter is not None else [])))


def format_ranks(ranks: Iterable[int]) -> str:
    """`[0..15]` for a run of three or more consecutive ranks, else the ranks: `[0,1]`, `[0,4,8]`."""
    ranks = list(ranks)
    parts, i = [], 0
    while i < len(ranks):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] == ranks[j] + 1:
            j += 1
        if j - i >= 2:
            parts.append(f"{ranks[i]}..{ranks[j]}")
        else:
            parts.extend(str(r) for r in ranks[i:j + 1])
        i = j + 1
    return "[" + ",".join(parts) + "]"


def compare(plan: PlanSource, engine_groups: dict[str, list[list[int]]], engine_spec: dict, *,
            rank: int | None = None) -> list[Finding]:
    """One ERROR finding per family or speculative key where the engine differs from the plan.

    `plan`: path to plan.json or its content. `engine_groups`: family -> every group's rank
    list as the engine created them (member order kept: it fixes group ranks and sources).
    `engine_spec`: SPEC_KEYS -> the engine's value; a key the engine lacks is left out or None.
    A family the engine did not build is not compared. `rank`: name this rank's groups in the
    messages (else the first rank whose group differs). A group finding's `group` is the family;
    a setting finding's `decision` is the key.
    """
    view = PlanView(load_plan(plan))
    out = [f for fam in engine_groups if (f := _family(view, fam, engine_groups[fam], rank))]
    out.extend(_settings(view, engine_spec))
    return out


def _family(view: PlanView, family: str, engine: list[list[int]], rank: int | None) -> Finding | None:
    engine = [list(g) for g in engine]
    if family not in view.families:
        if all(len(g) == 1 for g in engine):
            return None  # singletons: the plan's missing family is trivially the same
        return _group_finding(view, family, f"{family}: engine {_groups_text(engine)}, plan has no "
                              f"{family} family", ())
    plan_groups = view.groups(family)
    if _canonical(engine) == _canonical(plan_groups):
        return None
    mine = _owner(engine, plan_groups, rank)
    eg, pg = _group_of(engine, mine), _group_of(plan_groups, mine)
    return _group_finding(view, family, f"{family}: engine {_text(eg)}, plan {_text(pg)}", (mine,))


def _canonical(groups: list[list[int]]) -> list[tuple[int, ...]]:
    return sorted(tuple(g) for g in groups)


def _owner(engine, plan_groups, rank: int | None) -> int:
    """The rank whose groups the message shows: `rank`, else the first whose group differs."""
    if rank is not None:
        return rank
    for r in range(max((x for g in engine + plan_groups for x in g), default=0) + 1):
        if _group_of(engine, r) != _group_of(plan_groups, r):
            return r
    return 0


def _group_of(groups: list[list[int]], rank: int) -> list[int] | None:
    return next((list(g) for g in groups if rank in g), None)


def _text(group: list[int] | None) -> str:
    return "none" if group is None else format_ranks(group)


def _groups_text(groups: list[list[int]]) -> str:
    shown = " ".join(format_ranks(g) for g in groups[:4])
    return shown + (f" (+{len(groups) - 4} more)" if len(groups) > 4 else "")


def _group_finding(view: PlanView, family: str, message: str, ranks: tuple[int, ...]) -> Finding:
    return Finding(severity="ERROR", group=family, ranks=ranks, round="startup",
                   line=view.line("topology"), message=message,
                   fix="start the engine with the topology the plan was compiled for, or compile "
                   "the plan from the engine's topology")


def _settings(view: PlanView, engine_spec: dict) -> list[Finding]:
    unknown = sorted(set(engine_spec) - set(SPEC_KEYS))
    if unknown:
        raise ValueError(f"engine_spec keys {unknown} are not spec keys; valid: {list(SPEC_KEYS)}")
    plan = plan_settings(view)
    out = []
    for key in SPEC_KEYS:
        theirs = engine_spec.get(key)
        if theirs is None or _same(theirs, plan[key]):
            continue
        out.append(Finding(severity="ERROR", decision=key, round="startup",
                           line=view.line(f"speculative.{key}"),
                           message=f"{key}: engine {_value(theirs)}, plan {_value(plan[key])}",
                           fix=f"set the engine's {key} to the plan's, or compile the plan from the "
                           "engine's settings"))
    return out


def _same(found, planned) -> bool:
    if isinstance(found, str) and isinstance(planned, str):
        return found.lower() == planned.lower()
    if isinstance(found, (list, tuple)):
        return list(found) == list(planned or [])
    return found == planned


def _value(v) -> str:
    return format_ranks(v) if isinstance(v, (list, tuple)) else str(v)
