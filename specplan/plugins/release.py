"""The release a plan was made for against the release the plugin runs in (issue 37).

plan.json names its engine release when the spec named one older than the newest
(`engine_version`; absent: the newest specplan models). When the running engine's release
differs, the plugin logs one line saying both; when the running release is one specplan models
and its convention builds a family of the plan's differently (the groups of its
`families`, for the plan's widths), it refuses: the plan was made for other groups. A release
specplan does not model is left to the start-up check, which compares every group the engine
built with the plan (plugins/vllm.py initialize_model_parallel).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specplan.plan import Plan


def plan_release(engine: str, plan: Plan) -> str:
    from specplan.engines.releases import newest

    return plan.engine_version or newest(engine)


def release_difference(engine: str, plan: Plan, running: str) -> tuple[str | None, str | None]:
    """(the line to log, the refusal) for `plan` in the engine's release `running` (a local
    label such as +cpu ignored): (None, None) when it is the plan's release."""
    from specplan.engines.releases import NAMES, RELEASES

    made, now = plan_release(engine, plan), running.split("+")[0]
    if made == now:
        return None, None
    title = NAMES[engine]
    line = (f"plan {plan.name!r} was made for {title} {made}; this is {title} {running} "
            "(the start-up check compares every group it builds with the plan)")
    if now not in RELEASES[engine]:
        return line, None
    differs = _families_differ(engine, plan, made, now)
    if differs is None:
        return line, None
    return line, (f"plan {plan.name!r} was made for {title} {made}, whose groups {title} {now} "
                  f"builds otherwise: {differs}; compile the spec with engine_version: \"{now}\"")


def _families_differ(engine: str, plan: Plan, made: str, now: str) -> str | None:
    """The first family of the plan whose groups release `now` builds otherwise for the plan's
    widths (None: all equal, or the widths are no topology `now` accepts)."""
    from specplan.engines import convention
    from specplan.mesh.family import Family
    from specplan.schema.model import Topology

    names = {f.name for f in plan.families}
    try:
        topology = Topology.model_validate({**{k: v for k, v in plan.widths.items()
                                                if k in Topology.model_fields},
                                            "device": plan.device})
        moe = dict(is_moe=plan.moe is not None or "ep" in names, eplb="eplb" in names)
        engine_made = {f.name for f in convention(engine, made).families(topology, **moe)}
        theirs = {f.name: f for f in convention(engine, now).families(topology, **moe)}
    except (ValueError, TypeError):
        return None
    for fam in plan.families:  # the engine's families (the plan's own derived ones aside)
        if fam.name not in engine_made:
            continue
        mine = Family(fam.name, tuple(fam.rule.shape), tuple(fam.rule.strides), fam.rule.group_ndim)
        other = theirs.get(fam.name)
        if other is None:
            return f"{fam.name}: no such family in {now}"
        if other.groups() != mine.groups():
            return f"{fam.name} {other.groups()} (the plan's: {mine.groups()})"
    return None
